/**
 * The heartbeat watchdog both pools share: while claims are out, check them
 * every `min(heartbeatMs, timeout / 4)` and report any silent past the timeout.
 * The timer runs only while there are claims, and never holds the process open.
 */
export interface Watched {
  settled: boolean;
  lastHeartbeatAt: number;
}

export class HeartbeatWatchdog<C extends Watched> {
  #timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly options: { heartbeatMs: number; heartbeatTimeoutMs: number; claims: () => Iterable<C>; onSilent(claim: C, silentMs: number): void },
  ) {}

  /** Start or stop the timer as claims come and go. */
  update(claimsOut: number): void {
    if (claimsOut === 0) {
      this.stop();
      return;
    }
    if (this.#timer !== undefined) return;
    const { heartbeatMs, heartbeatTimeoutMs } = this.options;
    this.#timer = setInterval(() => {
      const now = Date.now();
      for (const claim of [...this.options.claims()]) {
        const silentMs = now - claim.lastHeartbeatAt;
        if (!claim.settled && silentMs > heartbeatTimeoutMs) this.options.onSilent(claim, silentMs);
      }
    }, Math.max(10, Math.min(heartbeatMs, Math.floor(heartbeatTimeoutMs / 4))));
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }
}
