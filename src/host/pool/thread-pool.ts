/**
 * The thread pool: `script` executions in worker threads, on piscina.
 *
 * One piscina per worker key: threads with different environments or heap
 * limits (an `rssMb` budget becomes the thread's `maxOldGenerationSizeMb`) are
 * never shared. Threads post heartbeats, progress and usage to their parent
 * port and hear `cancel` on the pool's broadcast channel; the host applies the
 * same claim rules as for processes — a message must name the live claim with
 * its fence — and the same heartbeat watchdog. A thread that exceeds its heap limit, throws
 * uncaught or exits is replaced by piscina; its claim ends `budget` (over an
 * rssMb limit) or `lost`.
 *
 * What a thread does not bound: Buffers and ArrayBuffers live outside the JS
 * heap, and CPU time is not measurable per thread — nodes with `cpuMs` or
 * `rssMb` budgets run in processes unless they ask for a thread.
 */
import { randomUUID } from 'node:crypto';
import { BroadcastChannel } from 'node:worker_threads';
import type { Logger } from 'pino';
import { Piscina } from 'piscina';
import { THREAD_MESSAGE, WorkerMessageSchema, type ExecutionResult, type TaskOf } from '../../protocol/ipc.js';
import { ExecutionMeter } from '../budget/meter.js';
import { HeartbeatWatchdog } from './watchdog.js';
import type { DistributiveOmit, ExecutionOutcome, ExecutionRequest, Pool, PoolStats, WorkerSpec } from './execution.js';

export interface ThreadPoolOptions {
  /** The thread entry file (compiled `worker/thread-entry.js`). */
  entry: string;
  maxThreads: number;
  idleMs: number;
  heartbeatMs: number;
  heartbeatTimeoutMs: number;
  killGraceMs: number;
  sampleMs: number;
  logger: Logger;
}

interface ThreadClaim {
  executionId: string;
  fence: number;
  settled: boolean;
  lastHeartbeatAt: number;
  request: ExecutionRequest;
  meter: ExecutionMeter;
  /** Aborting terminates the thread (piscina replaces it). */
  terminate: AbortController;
  running: Promise<unknown>;
  resolve(outcome: DistributiveOmit<ExecutionOutcome, 'durationMs'>): void;
  cleanup(): void;
}

export class ThreadPool implements Pool {
  readonly #options: ThreadPoolOptions;
  readonly #pools = new Map<string, Piscina>();
  /** When each pool last had work, for sweeping pools of runs that have ended. */
  readonly #lastUsed = new Map<string, number>();
  readonly #claims = new Map<string, ThreadClaim>();
  readonly #cancelChannelName = `runwarden-cancel-${randomUUID()}`;
  readonly #cancels = new BroadcastChannel(this.#cancelChannelName);
  #closing: Promise<void> | undefined;
  readonly #watchdog: HeartbeatWatchdog<ThreadClaim>;
  #stats = { workersStarted: 0, refusedMessages: 0, lostClaims: 0 };

  constructor(options: ThreadPoolOptions) {
    this.#options = options;
    this.#watchdog = new HeartbeatWatchdog({
      heartbeatMs: options.heartbeatMs,
      heartbeatTimeoutMs: options.heartbeatTimeoutMs,
      claims: () => this.#claims.values(),
      onSilent: (claim, silentMs) => this.#stopClaim(claim, { status: 'lost', reason: 'heartbeat_timeout', message: `the thread sent no heartbeat for ${silentMs} ms (timeout ${this.#options.heartbeatTimeoutMs} ms)` }, false),
    });
    (this.#cancels as unknown as { unref(): void }).unref();
  }

  stats(): PoolStats {
    let alive = 0;
    for (const pool of this.#pools.values()) alive += pool.threads.length;
    return { ...this.#stats, workersAlive: alive, busy: this.#claims.size };
  }

  /** Destroy pools nobody used for a while (script pools belong to one run each). */
  #sweep(): void {
    const now = Date.now();
    for (const [key, last] of this.#lastUsed) {
      const pool = this.#pools.get(key);
      if (pool === undefined || now - last < this.#options.idleMs * 2) continue;
      if ([...this.#claims.values()].some((c) => c.request.worker.key === key)) continue;
      this.#pools.delete(key);
      this.#lastUsed.delete(key);
      void pool.destroy();
    }
  }

  #pool(spec: WorkerSpec): Piscina {
    this.#sweep();
    this.#lastUsed.set(spec.key, Date.now());
    let pool = this.#pools.get(spec.key);
    if (pool === undefined) {
      pool = new Piscina({
        filename: this.#options.entry,
        minThreads: 0,
        maxThreads: this.#options.maxThreads,
        idleTimeout: this.#options.idleMs,
        env: spec.env,
        atomics: 'async',
        workerData: { cancelChannel: this.#cancelChannelName },
        ...(spec.heapMb === undefined
          ? {}
          : { resourceLimits: { maxOldGenerationSizeMb: spec.heapMb, maxYoungGenerationSizeMb: Math.min(64, Math.max(4, Math.floor(spec.heapMb / 8))) } }),
      });
      pool.on('workerCreate', () => {
        this.#stats.workersStarted += 1;
      });
      pool.on('error', (err: Error) => this.#options.logger.warn({ err: err.message }, 'thread pool error'));
      pool.on('message', (raw: unknown) => this.#onMessage(raw));
      this.#pools.set(spec.key, pool);
    }
    return pool;
  }

  /** Run one script execution in a thread. Never rejects: every way it can end is an outcome. */
  execute(request: ExecutionRequest): Promise<ExecutionOutcome> {
    const started = performance.now();
    if (request.signal.aborted) return Promise.resolve({ status: 'aborted', reason: request.signal.reason, durationMs: 0 });
    if (this.#closing !== undefined) return Promise.resolve({ status: 'aborted', reason: 'shutdown', durationMs: 0 });
    if (request.task.kind !== 'script') {
      return Promise.resolve({ status: 'error', durationMs: 0, result: { type: 'error', code: 'EXECUTOR_FAILED', message: `a ${request.task.kind} task cannot run in a thread` } });
    }
    const task: TaskOf<'script'> = request.task;
    const pool = this.#pool(request.worker);
    return new Promise<ExecutionOutcome>((resolve) => {
      const terminate = new AbortController();
      const onAbort = (): void => this.#stopClaim(claim, { status: 'aborted', reason: request.signal.reason }, true);
      const deadline = setTimeout(() => this.#stopClaim(claim, { status: 'timeout' }, true), request.timeoutMs);
      const meter = new ExecutionMeter({
        execution: request.limits.execution,
        run: request.limits.run,
        runUsed: request.limits.runUsed,
        sampleMs: this.#options.sampleMs,
        onBreach: (breach) => this.#stopClaim(claim, { status: 'budget', breach }, true),
      });
      const claim: ThreadClaim = {
        executionId: request.executionId,
        fence: request.fence,
        settled: false,
        lastHeartbeatAt: Date.now(),
        request,
        meter,
        terminate,
        running: Promise.resolve(),
        resolve: (outcome) => {
          const m = meter.measured();
          resolve({ ...outcome, durationMs: performance.now() - started, measured: { cpuMs: 0, peakRssMb: 0, tokensIn: m.tokensIn, tokensOut: m.tokensOut, costUsd: m.costUsd } } as ExecutionOutcome);
        },
        cleanup: () => {
          clearTimeout(deadline);
          meter.stop();
          request.signal.removeEventListener('abort', onAbort);
          this.#claims.delete(request.executionId);
          this.#watchdog.update(this.#claims.size);
        },
      };
      this.#claims.set(request.executionId, claim);
      request.signal.addEventListener('abort', onAbort, { once: true });
      this.#watchdog.update(this.#claims.size);
      meter.start();
      claim.running = pool
        .run({ executionId: request.executionId, fence: request.fence, heartbeatMs: this.#options.heartbeatMs, task }, { signal: terminate.signal })
        .then(
          (result: ExecutionResult) => {
            if (claim.settled) {
              this.#refuse(claim.executionId, 'result');
              return;
            }
            const breach = claim.meter.finalCheck(result.usage);
            this.#settle(claim, breach !== undefined ? { status: 'budget', breach } : result.type === 'ok' ? { status: 'ok', result } : { status: 'error', result });
          },
          (err: Error & { code?: string }) => {
            if (claim.settled) return; // stopped by us: the outcome is already decided
            const heapMb = request.worker.heapMb;
            if (err.code === 'ERR_WORKER_OUT_OF_MEMORY' && heapMb !== undefined) {
              this.#settle(claim, { status: 'budget', breach: { limit: 'rssMb', limitValue: heapMb, measured: heapMb, scope: request.limits.execution.rssMb === heapMb ? 'execution' : 'run' } });
              return;
            }
            this.#stats.lostClaims += 1;
            this.#settle(claim, { status: 'lost', reason: 'worker_lost', message: `the thread running it failed: ${err.code ?? ''} ${err.message}`.replace('  ', ' ') });
          },
        );
    });
  }

  #settle(claim: ThreadClaim, outcome: DistributiveOmit<ExecutionOutcome, 'durationMs'>): void {
    claim.settled = true;
    claim.cleanup();
    claim.resolve(outcome);
  }

  #refuse(executionId: string, type: string): void {
    this.#stats.refusedMessages += 1;
    this.#options.logger.warn({ executionId, type }, 'message from a settled or unknown thread execution refused');
  }

  /** A thread's message: accepted only for a live claim with its fence. */
  #onMessage(raw: unknown): void {
    if (typeof raw !== 'object' || raw === null || !(THREAD_MESSAGE in raw)) return; // not ours: a script's own postMessage
    const { [THREAD_MESSAGE]: _, ...body } = raw as Record<string, unknown>;
    const parsed = WorkerMessageSchema.safeParse(body);
    if (!parsed.success || parsed.data.type === 'ready' || parsed.data.type === 'result') {
      this.#refuse(String(body.executionId), 'invalid');
      return;
    }
    const message = parsed.data;
    const claim = this.#claims.get(message.executionId);
    if (claim === undefined || claim.settled || message.fence !== claim.fence) {
      this.#refuse(message.executionId, message.type);
      return;
    }
    claim.lastHeartbeatAt = Date.now();
    if (message.type === 'progress') claim.request.onProgress?.(message.stream, message.text);
    else if (message.type === 'usage') claim.meter.addUsage(message);
  }

  /**
   * Settle a claim with a failure outcome. Cooperatively first when `graceful`
   * (the script's signal fires), then — past `killGraceMs`, or at once — the
   * thread is terminated. The outcome is delivered once the task has ended.
   */
  #stopClaim(claim: ThreadClaim, outcome: DistributiveOmit<ExecutionOutcome, 'durationMs'>, graceful: boolean): void {
    if (claim.settled) return;
    claim.settled = true;
    claim.cleanup();
    if (outcome.status === 'lost') this.#stats.lostClaims += 1;
    if (graceful) {
      this.#cancels.postMessage({ executionId: claim.executionId, reason: outcome.status === 'timeout' ? 'timeout' : 'cancelled' });
      const kill = setTimeout(() => claim.terminate.abort('killed'), this.#options.killGraceMs);
      void claim.running.finally(() => clearTimeout(kill));
    } else claim.terminate.abort('killed');
    void claim.running.finally(() => claim.resolve(outcome));
  }



  /** Stop every thread (in-flight executions end `aborted`). Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      const claims = [...this.#claims.values()];
      for (const claim of claims) this.#stopClaim(claim, { status: 'aborted', reason: 'shutdown' }, true);
      await Promise.allSettled(claims.map((c) => c.running));
      await Promise.allSettled([...this.#pools.values()].map((p) => p.destroy()));
      this.#watchdog.stop();
      this.#cancels.close();
    })();
    return this.#closing;
  }
}
