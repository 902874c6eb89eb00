/**
 * The claim queue: a bound on executions running at once, shared fairly
 * between runs, with an optional bound per run. Waiting executions queue per
 * run, and a freed slot goes to the next run in round-robin order that is
 * under its own bound, so one run with a hundred fan-out members cannot starve
 * twenty runs with one node each.
 */

interface Waiter {
  grant(release: () => void): void;
  reject(reason: unknown): void;
}

export class Scheduler {
  readonly #max: number;
  readonly #maxPerRun: number;
  #running = 0;
  readonly #runningByRun = new Map<string, number>();
  /** Per-run FIFO queues; Map order is the round-robin order (a served run moves to the back). */
  readonly #queues = new Map<string, Waiter[]>();

  /** @param maxPerRun executions of one run at once. @default maxConcurrent */
  constructor(maxConcurrent: number, maxPerRun = maxConcurrent) {
    this.#max = maxConcurrent;
    this.#maxPerRun = maxPerRun;
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
    if (this.#running < this.#max && this.#queues.size === 0 && (this.#runningByRun.get(runId) ?? 0) < this.#maxPerRun) {
      this.#take(runId);
      return Promise.resolve(this.#releaser(runId));
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

  #take(runId: string): void {
    this.#running += 1;
    this.#runningByRun.set(runId, (this.#runningByRun.get(runId) ?? 0) + 1);
  }

  #releaser(runId: string): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#running -= 1;
      const left = (this.#runningByRun.get(runId) ?? 1) - 1;
      if (left === 0) this.#runningByRun.delete(runId);
      else this.#runningByRun.set(runId, left);
      this.#drain();
    };
  }

  #drain(): void {
    while (this.#running < this.#max) {
      // The first run in ring order that is under its own bound.
      let served: string | undefined;
      for (const [runId] of this.#queues) {
        if ((this.#runningByRun.get(runId) ?? 0) < this.#maxPerRun) {
          served = runId;
          break;
        }
      }
      if (served === undefined) return;
      const queue = this.#queues.get(served)!;
      const waiter = queue.shift()!;
      this.#queues.delete(served);
      if (queue.length > 0) this.#queues.set(served, queue); // to the back of the ring
      this.#take(served);
      waiter.grant(this.#releaser(served));
    }
  }
}
