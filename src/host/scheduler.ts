/**
 * The claim queue: a bound on executions running at once, shared fairly
 * between runs. Waiting executions queue per run, and a freed slot goes to the
 * next run in round-robin order, so one run with a hundred fan-out members
 * cannot starve twenty runs with one node each.
 */

interface Waiter {
  grant(release: () => void): void;
  reject(reason: unknown): void;
}

export class Scheduler {
  readonly #max: number;
  #running = 0;
  /** Per-run FIFO queues; Map order is the round-robin order (a served run moves to the back). */
  readonly #queues = new Map<string, Waiter[]>();

  constructor(maxConcurrent: number) {
    this.#max = maxConcurrent;
  }

  /** Executions holding a slot, and executions waiting for one. */
  stats(): { running: number; queued: number } {
    let queued = 0;
    for (const q of this.#queues.values()) queued += q.length;
    return { running: this.#running, queued };
  }

  /**
   * Wait for a slot. Resolves with the function that gives it back (call it once).
   * @throws the signal's reason when aborted while waiting.
   */
  acquire(runId: string, signal: AbortSignal): Promise<() => void> {
    if (signal.aborted) return Promise.reject(signal.reason);
    if (this.#running < this.#max && this.#queues.size === 0) {
      this.#running += 1;
      return Promise.resolve(this.#releaser());
    }
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        const queue = this.#queues.get(runId);
        const at = queue?.indexOf(waiter) ?? -1;
        if (queue !== undefined && at >= 0) {
          queue.splice(at, 1);
          if (queue.length === 0) this.#queues.delete(runId);
        }
        reject(signal.reason);
      };
      const waiter: Waiter = {
        grant: (release) => {
          signal.removeEventListener('abort', onAbort);
          resolve(release);
        },
        reject,
      };
      signal.addEventListener('abort', onAbort, { once: true });
      const queue = this.#queues.get(runId);
      if (queue === undefined) this.#queues.set(runId, [waiter]);
      else queue.push(waiter);
      this.#drain();
    });
  }

  #releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#running -= 1;
      this.#drain();
    };
  }

  #drain(): void {
    while (this.#running < this.#max) {
      const next = this.#queues.entries().next();
      if (next.done === true) return;
      const [runId, queue] = next.value;
      const waiter = queue.shift()!;
      this.#queues.delete(runId);
      if (queue.length > 0) this.#queues.set(runId, queue); // to the back of the ring
      this.#running += 1;
      waiter.grant(this.#releaser());
    }
  }
}
