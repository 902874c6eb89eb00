/**
 * The claim queue: a bound on executions running at once, shared fairly
 * between runs, with an optional bound per run, and two priorities.
 *
 * Waiting executions queue per run and per priority. A freed slot goes to
 * foreground work first; within a priority, to the next run in round-robin
 * order that is under its own bound, so one run with a hundred fan-out members
 * cannot starve twenty runs with one node each.
 *
 * Preemption: when every slot is busy and foreground work waits, the newest
 * background holder that can be preempted is asked to give its slot back (its
 * `onPreempt` runs once); the slot returns when the holder releases it, after
 * its execution stopped. No more holders are asked than foreground waiters
 * could use.
 */

/** `foreground`: a person waits for it; `background`: maintenance that yields its slot to foreground work. */
export type Priority = 'foreground' | 'background';

export interface SlotOptions {
  /** @default 'foreground' */
  priority?: Priority;
  /**
   * Called (once) when the scheduler wants this slot back for foreground work.
   * The holder stops its execution and then releases the slot. A holder without
   * it is never preempted.
   */
  onPreempt?: () => void;
}

interface Waiter {
  runId: string;
  priority: Priority;
  onPreempt: (() => void) | undefined;
  grant(release: () => void): void;
}

interface Holder {
  runId: string;
  priority: Priority;
  onPreempt: (() => void) | undefined;
  preempting: boolean;
}

export class Scheduler {
  readonly #max: number;
  readonly #maxPerRun: number;
  readonly #holders = new Set<Holder>(); // insertion order: oldest first
  readonly #runningByRun = new Map<string, number>();
  /** Per-run FIFO queues, one ring per priority; Map order is the round-robin order (a served run moves to the back). */
  readonly #rings: Record<Priority, Map<string, Waiter[]>> = { foreground: new Map(), background: new Map() };
  #preemptions = 0;

  /** @param maxPerRun executions of one run at once. @default maxConcurrent */
  constructor(maxConcurrent: number, maxPerRun = maxConcurrent) {
    this.#max = maxConcurrent;
    this.#maxPerRun = maxPerRun;
  }

  /** Executions holding a slot, executions waiting for one, and how many holders were preempted so far. */
  stats(): { running: number; queued: number; preempted: number } {
    let queued = 0;
    for (const ring of Object.values(this.#rings)) for (const q of ring.values()) queued += q.length;
    return { running: this.#holders.size, queued, preempted: this.#preemptions };
  }

  /**
   * Wait for a slot. Resolves with the function that gives it back (call it once).
   * @throws the signal's reason when aborted while waiting.
   */
  acquire(runId: string, signal: AbortSignal, options: SlotOptions = {}): Promise<() => void> {
    if (signal.aborted) return Promise.reject(signal.reason);
    const priority = options.priority ?? 'foreground';
    return new Promise((resolve, reject) => {
      const ring = this.#rings[priority];
      const onAbort = (): void => {
        const queue = ring.get(runId);
        const at = queue?.indexOf(waiter) ?? -1;
        if (queue !== undefined && at >= 0) {
          queue.splice(at, 1);
          if (queue.length === 0) ring.delete(runId);
        }
        reject(signal.reason);
      };
      const waiter: Waiter = {
        runId,
        priority,
        onPreempt: options.onPreempt,
        grant: (release) => {
          signal.removeEventListener('abort', onAbort);
          resolve(release);
        },
      };
      signal.addEventListener('abort', onAbort, { once: true });
      const queue = ring.get(runId);
      if (queue === undefined) ring.set(runId, [waiter]);
      else queue.push(waiter);
      this.#drain();
    });
  }

  #underRunBound(runId: string): boolean {
    return (this.#runningByRun.get(runId) ?? 0) < this.#maxPerRun;
  }

  #take(waiter: Waiter): () => void {
    const holder: Holder = { runId: waiter.runId, priority: waiter.priority, onPreempt: waiter.onPreempt, preempting: false };
    this.#holders.add(holder);
    this.#runningByRun.set(holder.runId, (this.#runningByRun.get(holder.runId) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#holders.delete(holder);
      const left = (this.#runningByRun.get(holder.runId) ?? 1) - 1;
      if (left === 0) this.#runningByRun.delete(holder.runId);
      else this.#runningByRun.set(holder.runId, left);
      this.#drain();
    };
  }

  /** The first run in ring order that is under its own bound, and its queue. */
  #next(ring: Map<string, Waiter[]>): string | undefined {
    for (const [runId] of ring) if (this.#underRunBound(runId)) return runId;
    return undefined;
  }

  #drain(): void {
    while (this.#holders.size < this.#max) {
      const priority: Priority | undefined = this.#next(this.#rings.foreground) !== undefined ? 'foreground' : this.#next(this.#rings.background) !== undefined ? 'background' : undefined;
      if (priority === undefined) break;
      const ring = this.#rings[priority];
      const served = this.#next(ring)!;
      const queue = ring.get(served)!;
      const waiter = queue.shift()!;
      ring.delete(served);
      if (queue.length > 0) ring.set(served, queue); // to the back of the ring
      waiter.grant(this.#take(waiter));
    }
    this.#preemptFor();
  }

  /** Ask background holders for their slots while foreground waiters that could use them wait. */
  #preemptFor(): void {
    let wanted = 0;
    for (const [runId, queue] of this.#rings.foreground) if (this.#underRunBound(runId)) wanted += Math.min(queue.length, this.#maxPerRun - (this.#runningByRun.get(runId) ?? 0));
    if (wanted === 0) return;
    let coming = 0;
    for (const h of this.#holders) if (h.preempting) coming += 1;
    const victims = [...this.#holders].reverse().filter((h) => h.priority === 'background' && !h.preempting && h.onPreempt !== undefined);
    for (const victim of victims.slice(0, Math.max(0, wanted - coming))) {
      victim.preempting = true;
      this.#preemptions += 1;
      victim.onPreempt!();
    }
  }
}
