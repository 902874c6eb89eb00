/**
 * The process pool: executions handed to worker child processes over IPC.
 *
 * Pending work lives in one map of claims (execution id → claim). A message
 * is accepted only if it names a live claim, with that claim's fence, from the
 * worker holding it; anything else — a late message from a lost execution, a
 * stale fence, a stranger's id — is refused, counted and logged. A worker's
 * exit settles every claim it held, in one place, even with exit code 0.
 *
 * A claim ends in exactly one outcome:
 * - `ok` / `error`: the worker's result.
 * - `lost`: the worker exited, or went silent past the heartbeat timeout.
 * - `timeout`: the execution ran past its deadline.
 * - `aborted`: the caller's signal fired (run cancelled, host stopping).
 * For every outcome but `ok` and `error`, the worker and its whole process
 * tree are gone before the outcome is delivered, so a retry never runs beside
 * the attempt it replaces.
 */
import type { Logger } from 'pino';
import { IPC_VERSION, type ExecutionResult, type Task, type WorkerMessage } from '../../protocol/ipc.js';
import { WorkerProcess, type WorkerExit } from './worker-process.js';

export interface ExecutionRequest {
  executionId: string;
  /** The fence of the run's guard; echoed by the worker on every message. */
  fence: number;
  task: Task;
  timeoutMs: number;
  /** Aborting stops the execution (its worker is killed) and yields `aborted`. */
  signal: AbortSignal;
  onProgress?: (stream: 'stdout' | 'stderr' | 'log', text: string) => void;
}

export type ExecutionOutcome = { durationMs: number; workerPid?: number } & (
  | { status: 'ok'; result: Extract<ExecutionResult, { type: 'ok' }> }
  | { status: 'error'; result: Extract<ExecutionResult, { type: 'error' }> }
  | { status: 'lost'; reason: 'worker_lost' | 'heartbeat_timeout'; message: string }
  | { status: 'timeout' }
  | { status: 'aborted'; reason: unknown }
);

export interface ProcessPoolOptions {
  /** The worker entry file (compiled `worker/main.js`). */
  workerEntry: string;
  heartbeatMs: number;
  heartbeatTimeoutMs: number;
  killGraceMs: number;
  /** An idle worker exits after this long. */
  idleMs: number;
  startTimeoutMs: number;
  logger: Logger;
  /** Environment of worker processes. @default process.env */
  env?: NodeJS.ProcessEnv;
}

interface Claim {
  executionId: string;
  fence: number;
  worker: WorkerProcess;
  startedAt: number;
  lastHeartbeatAt: number;
  settled: boolean;
  request: ExecutionRequest;
  resolve(outcome: ExecutionOutcome): void;
  cleanup(): void;
}

/** Counters, for tests, `status` and metrics. */
export interface PoolStats {
  workersStarted: number;
  workersAlive: number;
  busy: number;
  refusedMessages: number;
  lostClaims: number;
}

export class ProcessPool {
  readonly #options: ProcessPoolOptions;
  readonly #claims = new Map<string, Claim>();
  readonly #workers = new Set<WorkerProcess>();
  readonly #idle: WorkerProcess[] = [];
  #watchdog: NodeJS.Timeout | undefined;
  #closing: Promise<void> | undefined;
  #stats = { workersStarted: 0, refusedMessages: 0, lostClaims: 0 };

  constructor(options: ProcessPoolOptions) {
    this.#options = options;
  }

  stats(): PoolStats {
    return { ...this.#stats, workersAlive: this.#workers.size, busy: this.#claims.size };
  }

  /** Run one execution on a worker. Never rejects: every way it can end is an outcome. */
  async execute(request: ExecutionRequest): Promise<ExecutionOutcome> {
    const started = performance.now();
    if (request.signal.aborted) return { status: 'aborted', reason: request.signal.reason, durationMs: 0 };
    if (this.#closing !== undefined) return { status: 'aborted', reason: 'shutdown', durationMs: 0 };
    let worker: WorkerProcess;
    try {
      worker = await this.#acquireWorker(request.signal);
    } catch (err) {
      if (request.signal.aborted) return { status: 'aborted', reason: request.signal.reason, durationMs: performance.now() - started };
      return {
        status: 'error',
        durationMs: performance.now() - started,
        result: { type: 'error', code: 'WORKER_START_FAILED', message: (err as Error).message },
      };
    }
    return new Promise<ExecutionOutcome>((resolve) => {
      const onAbort = (): void => this.#stopClaim(claim, { status: 'aborted', reason: request.signal.reason }, this.#options.killGraceMs);
      const deadline = setTimeout(() => this.#stopClaim(claim, { status: 'timeout' }, this.#options.killGraceMs), request.timeoutMs);
      const claim: Claim = {
        executionId: request.executionId,
        fence: request.fence,
        worker,
        startedAt: started,
        lastHeartbeatAt: Date.now(),
        settled: false,
        request,
        resolve: (outcome) => resolve({ ...outcome, durationMs: performance.now() - started, workerPid: worker.pid }),
        cleanup: () => {
          clearTimeout(deadline);
          request.signal.removeEventListener('abort', onAbort);
          this.#claims.delete(request.executionId);
          this.#armWatchdog();
        },
      };
      this.#claims.set(request.executionId, claim);
      worker.state = 'busy';
      worker.executions += 1;
      request.signal.addEventListener('abort', onAbort, { once: true });
      this.#armWatchdog();
      const sent = worker.send({
        v: IPC_VERSION,
        type: 'dispatch',
        executionId: request.executionId,
        fence: request.fence,
        heartbeatMs: this.#options.heartbeatMs,
        task: request.task,
      });
      if (!sent) this.#stopClaim(claim, { status: 'lost', reason: 'worker_lost', message: `worker ${worker.pid} closed its channel before dispatch` }, 0);
    });
  }

  async #acquireWorker(signal: AbortSignal): Promise<WorkerProcess> {
    for (let w = this.#idle.pop(); w !== undefined; w = this.#idle.pop()) {
      if (w.state !== 'idle') continue;
      if (w.idleTimer !== undefined) clearTimeout(w.idleTimer);
      w.idleTimer = undefined;
      return w;
    }
    const worker = new WorkerProcess({
      entry: this.#options.workerEntry,
      env: { ...(this.#options.env ?? process.env), RUNWARDEN_KILL_GRACE_MS: String(this.#options.killGraceMs) },
      onMessage: (w, m) => this.#onMessage(w, m),
      onInvalidMessage: (w, detail) => {
        this.#stats.refusedMessages += 1;
        this.#options.logger.warn({ workerPid: w.pid, detail, code: 'IPC_INVALID' }, 'invalid message from worker refused');
      },
      onExit: (w, exit) => this.#onExit(w, exit),
    });
    this.#stats.workersStarted += 1;
    this.#workers.add(worker);
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    try {
      await Promise.race([
        worker.ready,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`worker ${worker.pid} did not report ready within ${this.#options.startTimeoutMs} ms`)), this.#options.startTimeoutMs);
          onAbort = () => reject(new Error('aborted'));
          signal.addEventListener('abort', onAbort, { once: true });
        }),
      ]);
    } catch (err) {
      await worker.stop({ notify: false, graceMs: 0 });
      throw err;
    } finally {
      clearTimeout(timer);
      if (onAbort !== undefined) signal.removeEventListener('abort', onAbort);
    }
    return worker;
  }

  #onMessage(worker: WorkerProcess, message: WorkerMessage): void {
    if (message.type === 'ready') return;
    const claim = this.#claims.get(message.executionId);
    if (claim === undefined || claim.settled || claim.worker !== worker || claim.fence !== message.fence) {
      this.#stats.refusedMessages += 1;
      this.#options.logger.warn(
        { workerPid: worker.pid, executionId: message.executionId, fence: message.fence, type: message.type, reason: claim === undefined ? 'no live claim' : claim.settled ? 'claim already settled' : 'claim held elsewhere or fence mismatch' },
        'message from a lost or unknown execution refused',
      );
      return;
    }
    switch (message.type) {
      case 'heartbeat':
        claim.lastHeartbeatAt = Date.now();
        return;
      case 'progress':
        claim.lastHeartbeatAt = Date.now();
        claim.request.onProgress?.(message.stream, message.text);
        return;
      case 'result': {
        claim.settled = true;
        claim.cleanup();
        const result = message.result;
        claim.resolve(result.type === 'ok' ? { status: 'ok', result, durationMs: 0 } : { status: 'error', result, durationMs: 0 });
        this.#release(worker);
        return;
      }
    }
  }

  /**
   * Settle a claim with a failure outcome and retire its worker (SIGTERM, then
   * SIGKILL after `graceMs`, 0 = at once); deliver the outcome once the worker
   * and its whole tree are gone. From this moment the claim's messages are refused.
   */
  #stopClaim(claim: Claim, outcome: DistributiveOmit<ExecutionOutcome, 'durationMs'>, graceMs: number): void {
    if (claim.settled) return;
    claim.settled = true;
    claim.cleanup();
    if (outcome.status === 'lost') this.#stats.lostClaims += 1;
    this.#options.logger.info({ executionId: claim.executionId, workerPid: claim.worker.pid, outcome: outcome.status }, 'execution stopped; retiring its worker');
    claim.worker.send({ v: IPC_VERSION, type: 'cancel', executionId: claim.executionId, fence: claim.fence, reason: outcome.status === 'timeout' ? 'timeout' : 'cancelled' });
    void claim.worker.stop({ notify: false, graceMs }).then(() => claim.resolve({ ...outcome, durationMs: 0 }));
  }

  #onExit(worker: WorkerProcess, exit: WorkerExit): void {
    this.#workers.delete(worker);
    const at = this.#idle.indexOf(worker);
    if (at >= 0) this.#idle.splice(at, 1);
    for (const claim of [...this.#claims.values()]) {
      if (claim.worker !== worker || claim.settled) continue;
      const how = exit.signal !== null ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
      // An exit while holding an execution is a loss even with code 0. Its programs may live on in its group: stop them too.
      this.#stopClaim(claim, { status: 'lost', reason: 'worker_lost', message: `worker ${worker.pid} ${how} while executing${exit.stderrTail ? `: ${exit.stderrTail.slice(-500)}` : ''}` }, 0);
    }
  }

  #release(worker: WorkerProcess): void {
    if (worker.state !== 'busy') return;
    if (this.#closing !== undefined) {
      void worker.stop({ notify: true, graceMs: this.#options.killGraceMs });
      return;
    }
    worker.state = 'idle';
    this.#idle.push(worker);
    worker.idleTimer = setTimeout(() => {
      const at = this.#idle.indexOf(worker);
      if (at >= 0) this.#idle.splice(at, 1);
      void worker.stop({ notify: true, graceMs: this.#options.killGraceMs });
    }, this.#options.idleMs);
    worker.idleTimer.unref();
  }

  #armWatchdog(): void {
    if (this.#claims.size === 0) {
      if (this.#watchdog !== undefined) clearInterval(this.#watchdog);
      this.#watchdog = undefined;
      return;
    }
    if (this.#watchdog !== undefined) return;
    const every = Math.max(10, Math.min(this.#options.heartbeatMs, Math.floor(this.#options.heartbeatTimeoutMs / 4)));
    this.#watchdog = setInterval(() => {
      const now = Date.now();
      for (const claim of [...this.#claims.values()]) {
        const silentMs = now - claim.lastHeartbeatAt;
        if (!claim.settled && silentMs > this.#options.heartbeatTimeoutMs) {
          this.#stopClaim(claim, { status: 'lost', reason: 'heartbeat_timeout', message: `worker ${claim.worker.pid} sent no heartbeat for ${silentMs} ms (timeout ${this.#options.heartbeatTimeoutMs} ms)` }, this.#options.killGraceMs);
        }
      }
    }, every);
    this.#watchdog.unref();
  }

  /** Stop every worker (in-flight executions end `aborted`) and wait until all are gone. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      for (const claim of [...this.#claims.values()]) this.#stopClaim(claim, { status: 'aborted', reason: 'shutdown' }, this.#options.killGraceMs);
      await Promise.all([...this.#workers].map((w) => w.stop({ notify: true, graceMs: this.#options.killGraceMs })));
      if (this.#watchdog !== undefined) clearInterval(this.#watchdog);
    })();
    return this.#closing;
  }
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
