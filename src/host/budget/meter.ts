/**
 * Metering one execution against its limits.
 *
 * - `wallMs`: time since the execution started.
 * - `cpuMs`, `rssMb`: for a worker process, sampled with pidusage every
 *   `sampleMs` over the worker's whole process tree (the worker and every
 *   process it started). CPU is the worker's CPU since the execution started
 *   plus the CPU of each descendant (the largest value seen per process, so a
 *   program that exits keeps what it used while sampled); memory is the sum of
 *   resident sets. A thread shares its process, so neither is measured there.
 * - `tokens`, `costUsd`: summed from usage reports.
 *
 * The first limit exceeded — an execution limit, or a run limit by the run's
 * total so far plus this execution — is reported once through `onBreach`.
 */
import pidusage from 'pidusage';
import type { Budget, BudgetLimit, Measured } from '../../protocol/budget.js';
import { firstBreach } from '../../protocol/budget.js';
import { descendants } from '../../util/process-tree.js';

export interface Breach {
  limit: BudgetLimit;
  limitValue: number;
  measured: number;
  /** Whether the execution's own limit or what was left of the run's was exceeded. */
  scope: 'execution' | 'run';
}

export interface MeterOptions {
  /** The execution's limits. */
  execution: Budget;
  /** The run's limits. */
  run: Budget;
  /** What the run had used before this execution (its totals; `rssMb` is not summed). */
  runUsed: Measured;
  /** The worker process to sample, if the execution runs in one. */
  pid?: number;
  sampleMs: number;
  onBreach(breach: Breach): void;
}

/** pidusage keeps a /proc file open per process for this long after its last sample. */
const PIDUSAGE_MAXAGE_MS = 5000;

export class ExecutionMeter {
  readonly #options: MeterOptions;
  readonly #started = performance.now();
  readonly #timers: NodeJS.Timeout[] = [];
  #baselineCpuMs: Promise<number | undefined> = Promise.resolve(undefined);
  readonly #descendantCpuMs = new Map<string, number>();
  #cpuMs = 0;
  #rssMb = 0;
  #peakRssMb = 0;
  #tokensIn = 0;
  #tokensOut = 0;
  #costUsd = 0;
  #breached = false;
  #sampling = false;

  constructor(options: MeterOptions) {
    this.#options = options;
  }

  /**
   * Start sampling (for a worker process: first after `sampleMs`, so a short
   * execution costs nothing) and arm the wall-clock deadline.
   */
  start(): void {
    if (this.#options.pid !== undefined) {
      // The worker's CPU so far is the baseline: it may have run other executions before this one.
      this.#baselineCpuMs = pidusage(this.#options.pid, { maxage: PIDUSAGE_MAXAGE_MS }).then(
        (s) => s.ctime,
        () => undefined,
      );
      const sampler = setInterval(() => void this.#sample(), this.#options.sampleMs);
      sampler.unref();
      this.#timers.push(sampler);
    }
    for (const wallMs of [this.#options.execution.wallMs, this.#options.run.wallMs]) {
      if (wallMs === undefined) continue;
      const deadline = setTimeout(() => this.#check(), wallMs + 1);
      deadline.unref();
      this.#timers.push(deadline);
    }
  }

  stop(): void {
    for (const timer of this.#timers.splice(0)) clearTimeout(timer);
  }

  /** Add usage reported by the execution. */
  addUsage(usage: { tokensIn: number; tokensOut: number; costUsd: number }): void {
    this.#tokensIn += usage.tokensIn;
    this.#tokensOut += usage.tokensOut;
    this.#costUsd += usage.costUsd;
    this.#check();
  }

  measured(): Measured & { peakRssMb: number; tokensIn: number; tokensOut: number } {
    return {
      wallMs: performance.now() - this.#started,
      cpuMs: this.#cpuMs,
      rssMb: this.#rssMb,
      tokens: this.#tokensIn + this.#tokensOut,
      tokensIn: this.#tokensIn,
      tokensOut: this.#tokensOut,
      costUsd: this.#costUsd,
      peakRssMb: this.#peakRssMb,
    };
  }

  async #sample(): Promise<void> {
    const pid = this.#options.pid;
    if (pid === undefined || this.#sampling || this.#breached) return;
    this.#sampling = true;
    try {
      const pids = [pid, ...(await descendants(pid))];
      const stats = await Promise.all(pids.map((p) => pidusage(p, { maxage: PIDUSAGE_MAXAGE_MS }).catch(() => undefined)));
      const baseline = await this.#baselineCpuMs;
      let rssBytes = 0;
      stats.forEach((stat, i) => {
        if (stat === undefined) return;
        rssBytes += stat.memory;
        if (pids[i] === pid) return;
        const key = `${pids[i]}@${Math.round(stat.timestamp - stat.elapsed)}`;
        this.#descendantCpuMs.set(key, Math.max(this.#descendantCpuMs.get(key) ?? 0, stat.ctime));
      });
      const own = stats[0] === undefined || baseline === undefined ? 0 : stats[0].ctime - baseline;
      let children = 0;
      for (const ms of this.#descendantCpuMs.values()) children += ms;
      this.#cpuMs = Math.max(this.#cpuMs, own + children);
      this.#rssMb = rssBytes / 1_048_576;
      this.#peakRssMb = Math.max(this.#peakRssMb, this.#rssMb);
    } finally {
      this.#sampling = false;
    }
    this.#check();
  }

  /**
   * The last word, when the execution reports its result: the worker's own
   * figures (its CPU, its usage tally) count where they exceed what sampling
   * saw, so a limit crossed between samples is still a breach.
   */
  finalCheck(reported: { cpuMs: number; tokensIn: number; tokensOut: number; costUsd: number } | undefined): Breach | undefined {
    if (this.#breached || reported === undefined) return undefined;
    this.#cpuMs = Math.max(this.#cpuMs, reported.cpuMs);
    this.#tokensIn = Math.max(this.#tokensIn, reported.tokensIn);
    this.#tokensOut = Math.max(this.#tokensOut, reported.tokensOut);
    this.#costUsd = Math.max(this.#costUsd, reported.costUsd);
    return this.#evaluate();
  }

  #check(): void {
    const breach = this.#evaluate();
    if (breach !== undefined) this.#options.onBreach(breach);
  }

  /** The first limit exceeded, once: later calls return nothing. */
  #evaluate(): Breach | undefined {
    if (this.#breached) return undefined;
    const measured = this.measured();
    const own = firstBreach(this.#options.execution, measured);
    const before = this.#options.runUsed;
    const runTotal: Measured = {
      wallMs: before.wallMs + measured.wallMs,
      cpuMs: before.cpuMs + measured.cpuMs,
      rssMb: measured.rssMb,
      tokens: before.tokens + measured.tokens,
      costUsd: before.costUsd + measured.costUsd,
    };
    const run = own === undefined ? firstBreach(this.#options.run, runTotal) : undefined;
    const breach = own !== undefined ? { ...own, scope: 'execution' as const } : run !== undefined ? { ...run, scope: 'run' as const } : undefined;
    if (breach === undefined) return undefined;
    this.#breached = true;
    this.stop();
    return breach;
  }
}
