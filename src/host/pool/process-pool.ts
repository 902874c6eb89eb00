/**
 * The process pool: executions handed to worker child processes over IPC.
 *
 * Pending work lives in one map of claims (execution id → claim). A message
 * is accepted only if it names a live claim, with that claim's fence, from the
 * worker holding it; anything else — a late message from a lost execution, a
 * stale fence, a stranger's id — is refused, counted and logged. A worker's
 * exit settles every claim it held, in one place, even with exit code 0.
 *
 * Workers are kept warm and reused, but only by executions with the same
 * worker key (isolation, policy fingerprint, permission flags): an execution
 * never runs in a worker started under another policy. A worker retires after
 * `recycleAfter` executions, after `idleMs` idle, and after any execution that
 * did not end with a result (timeout, budget breach, loss, abort). `minWarm`
 * spares are kept ready per key once the key has been used.
 *
 * For every outcome but `ok` and `error`, the worker and its whole process
 * tree are gone before the outcome is delivered, so a retry never runs beside
 * the attempt it replaces.
 */
import type { Logger } from 'pino';
import { IPC_VERSION, type WorkerMessage } from '../../protocol/ipc.js';
import { ExecutionMeter } from '../budget/meter.js';
import { HeartbeatWatchdog } from './watchdog.js';
import type { DistributiveOmit, ExecutionOutcome, ExecutionRequest, Pool, PoolStats, WorkerSpec } from './execution.js';
import { WorkerProcess, type WorkerExit } from './worker-process.js';

export interface ProcessPoolOptions {
  /** The worker entry file (compiled `worker/main.js`). */
  workerEntry: string;
  heartbeatMs: number;
  heartbeatTimeoutMs: number;
  killGraceMs: number;
  /** An idle worker exits after this long. */
  idleMs: number;
  startTimeoutMs: number;
  /** Executions a worker runs before it is replaced. */
  recycleAfter: number;
  /** Idle spares kept per worker key once the key has been used. */
  minWarm: number;
  /** How often a busy worker's process tree is sampled for CPU and memory. */
  sampleMs: number;
  logger: Logger;
}

interface Claim {
  executionId: string;
  fence: number;
  worker: WorkerProcess;
  lastHeartbeatAt: number;
  settled: boolean;
  request: ExecutionRequest;
  meter: ExecutionMeter;
  resolve(outcome: DistributiveOmit<ExecutionOutcome, 'durationMs'>): void;
  cleanup(): void;
}

export class ProcessPool implements Pool {
  readonly #options: ProcessPoolOptions;
  readonly #claims = new Map<string, Claim>();
  readonly #workers = new Set<WorkerProcess>();
  readonly #idle = new Map<string, WorkerProcess[]>();
  readonly #keyOf = new WeakMap<WorkerProcess, string>();
  #closing: Promise<void> | undefined;
  readonly #watchdog: HeartbeatWatchdog<Claim>;
  #stats = { workersStarted: 0, refusedMessages: 0, lostClaims: 0 };

  constructor(options: ProcessPoolOptions) {
    this.#options = options;
    this.#watchdog = new HeartbeatWatchdog({
      heartbeatMs: options.heartbeatMs,
      heartbeatTimeoutMs: options.heartbeatTimeoutMs,
      claims: () => this.#claims.values(),
      onSilent: (claim, silentMs) => this.#stopClaim(claim, { status: 'lost', reason: 'heartbeat_timeout', message: `worker ${claim.worker.pid} sent no heartbeat for ${silentMs} ms (timeout ${this.#options.heartbeatTimeoutMs} ms)` }, this.#options.killGraceMs),
    });
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
      worker = await this.#acquireWorker(request.worker, request.signal);
    } catch (err) {
      if (request.signal.aborted) return { status: 'aborted', reason: request.signal.reason, durationMs: performance.now() - started };
      return { status: 'error', durationMs: performance.now() - started, result: { type: 'error', code: 'WORKER_START_FAILED', message: (err as Error).message } };
    }
    this.#keepWarm(request.worker);
    return new Promise<ExecutionOutcome>((resolve) => {
      const onAbort = (): void => this.#stopClaim(claim, { status: 'aborted', reason: request.signal.reason }, this.#options.killGraceMs);
      const deadline = setTimeout(() => this.#stopClaim(claim, { status: 'timeout' }, this.#options.killGraceMs), request.timeoutMs);
      const meter = new ExecutionMeter({
        execution: request.limits.execution,
        run: request.limits.run,
        runUsed: request.limits.runUsed,
        pid: worker.pid,
        sampleMs: this.#options.sampleMs,
        onBreach: (breach) => this.#stopClaim(claim, { status: 'budget', breach }, this.#options.killGraceMs),
      });
      const claim: Claim = {
        executionId: request.executionId,
        fence: request.fence,
        worker,
        lastHeartbeatAt: Date.now(),
        settled: false,
        request,
        meter,
        resolve: (outcome) => {
          const m = meter.measured();
          resolve({ ...outcome, durationMs: performance.now() - started, workerPid: worker.pid, measured: { cpuMs: m.cpuMs, peakRssMb: m.peakRssMb, tokensIn: m.tokensIn, tokensOut: m.tokensOut, costUsd: m.costUsd } } as ExecutionOutcome);
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
      worker.state = 'busy';
      worker.executions += 1;
      request.signal.addEventListener('abort', onAbort, { once: true });
      this.#watchdog.update(this.#claims.size);
      meter.start();
      const sent = worker.send({
        v: IPC_VERSION,
        type: 'dispatch',
        executionId: request.executionId,
        fence: request.fence,
        heartbeatMs: this.#options.heartbeatMs,
        commands: request.commands,
        programEnv: request.worker.programEnv,
        task: request.task,
      });
      if (!sent) this.#stopClaim(claim, { status: 'lost', reason: 'worker_lost', message: `worker ${worker.pid} closed its channel before dispatch` }, 0);
    });
  }

  async #acquireWorker(spec: WorkerSpec, signal: AbortSignal): Promise<WorkerProcess> {
    const idle = this.#idle.get(spec.key) ?? [];
    for (let w = idle.pop(); w !== undefined; w = idle.pop()) {
      if (w.state !== 'idle') continue;
      if (w.idleTimer !== undefined) clearTimeout(w.idleTimer);
      w.idleTimer = undefined;
      if (idle.length === 0) this.#idle.delete(spec.key);
      return w;
    }
    this.#idle.delete(spec.key);
    const worker = this.#spawn(spec);
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

  #spawn(spec: WorkerSpec): WorkerProcess {
    const worker = new WorkerProcess({
      entry: this.#options.workerEntry,
      env: { ...spec.env, RUNWARDEN_KILL_GRACE_MS: String(this.#options.killGraceMs) },
      execArgv: spec.execArgv,
      onMessage: (w, m) => this.#onMessage(w, m),
      onInvalidMessage: (w, detail) => {
        this.#stats.refusedMessages += 1;
        this.#options.logger.warn({ workerPid: w.pid, detail, code: 'IPC_INVALID' }, 'invalid message from worker refused');
      },
      onExit: (w, exit) => this.#onExit(w, exit),
    });
    this.#stats.workersStarted += 1;
    this.#workers.add(worker);
    this.#keyOf.set(worker, spec.key);
    return worker;
  }

  /** Keep `minWarm` idle spares of this key (started in the background). */
  #keepWarm(spec: WorkerSpec): void {
    if (this.#options.minWarm <= 0 || this.#closing !== undefined) return;
    const idle = this.#idle.get(spec.key) ?? [];
    const starting = [...this.#workers].filter((w) => w.state === 'starting' && this.#keyOf.get(w) === spec.key).length;
    for (let i = idle.length + starting; i < this.#options.minWarm; i++) {
      const spare = this.#spawn(spec);
      spare.ready.then(
        () => this.#toIdle(spare),
        () => undefined,
      );
    }
  }

  #onMessage(worker: WorkerProcess, message: WorkerMessage): void {
    if (message.type === 'ready') return;
    const claim = this.#claims.get(message.executionId);
    if (claim === undefined || claim.settled || claim.worker !== worker || claim.fence !== message.fence) {
      this.#stats.refusedMessages += 1;
      // While the pool closes, results of executions it just stopped are expected, not suspicious.
      this.#options.logger[this.#closing !== undefined && claim?.settled === true ? 'debug' : 'warn'](
        { workerPid: worker.pid, executionId: message.executionId, fence: message.fence, type: message.type, reason: claim === undefined ? 'no live claim' : claim.settled ? 'claim already settled' : 'claim held elsewhere or fence mismatch' },
        'message from a lost or unknown execution refused',
      );
      return;
    }
    claim.lastHeartbeatAt = Date.now();
    switch (message.type) {
      case 'heartbeat':
        return;
      case 'progress':
        claim.request.onProgress?.(message.stream, message.text);
        return;
      case 'usage':
        claim.meter.addUsage(message);
        return;
      case 'result': {
        const result = message.result;
        const breach = claim.meter.finalCheck(result.usage);
        if (breach !== undefined) {
          this.#stopClaim(claim, { status: 'budget', breach }, this.#options.killGraceMs);
          return;
        }
        claim.settled = true;
        claim.cleanup();
        claim.resolve(result.type === 'ok' ? { status: 'ok', result } : { status: 'error', result });
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
    void claim.worker.stop({ notify: false, graceMs }).then(() => claim.resolve(outcome));
  }

  #onExit(worker: WorkerProcess, exit: WorkerExit): void {
    this.#workers.delete(worker);
    const idle = this.#idle.get(this.#keyOf.get(worker) ?? '');
    const at = idle?.indexOf(worker) ?? -1;
    if (idle !== undefined && at >= 0) idle.splice(at, 1);
    for (const claim of [...this.#claims.values()]) {
      if (claim.worker !== worker || claim.settled) continue;
      const how = exit.signal !== null ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
      // An exit while holding an execution is a loss even with code 0. Its programs may live on in its group: stop them too.
      this.#stopClaim(claim, { status: 'lost', reason: 'worker_lost', message: `worker ${worker.pid} ${how} while executing${exit.stderrTail ? `: ${exit.stderrTail.slice(-500)}` : ''}` }, 0);
    }
  }

  #release(worker: WorkerProcess): void {
    if (worker.state !== 'busy') return;
    if (this.#closing !== undefined || worker.executions >= this.#options.recycleAfter) {
      void worker.stop({ notify: true, graceMs: this.#options.killGraceMs });
      return;
    }
    this.#toIdle(worker);
  }

  #toIdle(worker: WorkerProcess): void {
    if (worker.state === 'exited' || worker.state === 'retiring') return;
    const key = this.#keyOf.get(worker)!;
    worker.state = 'idle';
    const idle = this.#idle.get(key) ?? [];
    idle.push(worker);
    this.#idle.set(key, idle);
    worker.idleTimer = setTimeout(() => {
      const list = this.#idle.get(key) ?? [];
      const at = list.indexOf(worker);
      if (at >= 0) list.splice(at, 1);
      if (list.length === 0) this.#idle.delete(key);
      void worker.stop({ notify: true, graceMs: this.#options.killGraceMs });
    }, this.#options.idleMs);
    worker.idleTimer.unref();
  }



  /** Stop every worker (in-flight executions end `aborted`) and wait until all are gone. Idempotent. */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      for (const claim of [...this.#claims.values()]) this.#stopClaim(claim, { status: 'aborted', reason: 'shutdown' }, this.#options.killGraceMs);
      await Promise.all([...this.#workers].map((w) => w.stop({ notify: true, graceMs: this.#options.killGraceMs })));
      this.#watchdog.stop();
    })();
    return this.#closing;
  }
}
