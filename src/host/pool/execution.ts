/**
 * What both pools take and give: one execution request, and the one outcome
 * it ends in.
 */
import type { Budget, Measured } from '../../protocol/budget.js';
import type { ExecutionResult, Task } from '../../protocol/ipc.js';
import type { Breach } from '../budget/meter.js';

/** How a worker for an execution is started; workers are shared only between executions with the same `key`. */
export interface WorkerSpec {
  /** Isolation, policy fingerprint and permission mode: what makes two workers interchangeable. */
  key: string;
  /** The worker's whole environment (already narrowed to the policy; never NODE_OPTIONS and the like). */
  env: Record<string, string>;
  /** Variables only the programs a worker starts get (NODE_OPTIONS, LD_PRELOAD, …). */
  programEnv: Record<string, string>;
  /** Node flags of a worker process (the permission model for scripts). */
  execArgv: string[];
  /** A thread's heap limit (from an `rssMb` budget), in MB. */
  heapMb?: number;
}

export interface ExecutionRequest {
  executionId: string;
  /** The fence of the run's guard; echoed by the worker on every message. */
  fence: number;
  task: Task;
  worker: WorkerSpec;
  /** The executables the task may start (`*`: any). */
  commands: string[];
  /** The execution's limits, the run's, and what the run had used before this execution. */
  limits: { execution: Budget; run: Budget; runUsed: Measured };
  timeoutMs: number;
  /** Aborting stops the execution (its worker is stopped) and yields `aborted`. */
  signal: AbortSignal;
  onProgress?: (stream: 'stdout' | 'stderr' | 'log', text: string) => void;
}

/** What the host measured of an execution. */
export interface Measurement {
  cpuMs: number;
  peakRssMb: number;
  tokensIn: number;
  tokensOut: number;
  costUsd: number;
}

/**
 * - `ok` / `error`: the worker's result.
 * - `lost`: the worker exited or crashed, or went silent past the heartbeat timeout.
 * - `timeout`: the execution ran past its `timeoutMs`.
 * - `budget`: it exceeded a limit.
 * - `aborted`: the caller's signal fired (run cancelled, host stopping).
 * For every outcome but `ok` and `error`, the worker (and for a process its
 * whole tree) is gone before the outcome is delivered.
 */
export type ExecutionOutcome = { durationMs: number; workerPid?: number; measured?: Measurement } & (
  | { status: 'ok'; result: Extract<ExecutionResult, { type: 'ok' }> }
  | { status: 'error'; result: Extract<ExecutionResult, { type: 'error' }> }
  | { status: 'lost'; reason: 'worker_lost' | 'heartbeat_timeout'; message: string }
  | { status: 'timeout' }
  | { status: 'budget'; breach: Breach }
  | { status: 'aborted'; reason: unknown }
);

export type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** Counters, for tests, `status` and metrics. */
export interface PoolStats {
  workersStarted: number;
  workersAlive: number;
  busy: number;
  refusedMessages: number;
  lostClaims: number;
}

/** A pool of workers of one isolation. */
export interface Pool {
  execute(request: ExecutionRequest): Promise<ExecutionOutcome>;
  stats(): PoolStats;
  close(): Promise<void>;
}
