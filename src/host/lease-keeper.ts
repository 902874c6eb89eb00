/**
 * Renews the leases a host holds, on one timer of its own: a run executing one
 * long node makes no commits for a while and must not look abandoned for it.
 * A renewal that finds the guard superseded tells the run to stop at once.
 */
import type { Logger } from 'pino';
import type { RunGuard, RunStore } from '../store/run-store.js';

export class LeaseKeeper {
  readonly #store: RunStore;
  readonly #renewMs: number;
  readonly #logger: Logger;
  readonly #held = new Map<string, { guard: RunGuard; onSuperseded: () => void }>();
  #timer: NodeJS.Timeout | undefined;
  #renewing = false;

  constructor(store: RunStore, renewMs: number, logger: Logger) {
    this.#store = store;
    this.#renewMs = renewMs;
    this.#logger = logger;
  }

  /** Keep `guard` renewed until {@link drop}. `onSuperseded` runs if a renewal finds it taken over. */
  hold(guard: RunGuard, onSuperseded: () => void): void {
    this.#held.set(guard.runId, { guard, onSuperseded });
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => void this.#renewAll(), this.#renewMs);
      this.#timer.unref();
    }
  }

  drop(runId: string): void {
    this.#held.delete(runId);
    if (this.#held.size === 0 && this.#timer !== undefined) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }

  async #renewAll(): Promise<void> {
    if (this.#renewing) return;
    this.#renewing = true;
    try {
      for (const [runId, entry] of [...this.#held]) {
        const status = await this.#store.renew(entry.guard).catch(() => 'blocked' as const);
        if (status === 'superseded' && this.#held.get(runId) === entry) {
          this.#logger.warn({ runId, fence: entry.guard.fence }, 'lease superseded; stopping the run');
          this.#held.delete(runId);
          entry.onSuperseded();
        } else if (status === 'blocked') {
          this.#logger.warn({ runId }, 'lease renewal blocked; will retry');
        }
      }
    } finally {
      this.#renewing = false;
    }
  }

  close(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#held.clear();
  }
}
