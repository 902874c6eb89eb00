/**
 * How one attempt of a node ended, in the kernel's terms, and the conversion
 * from the pools' execution outcomes.
 */
import { describeBreach } from '../../protocol/budget.js';
import type { ErrorCode } from '../../protocol/errors.js';
import type { ErrorInfo, Usage } from '../../protocol/events.js';
import type { VerifyData } from '../../protocol/ipc.js';
import { addUsage, emptyUsage } from '../../protocol/record.js';
import type { ExecutionOutcome } from '../pool/execution.js';

/** A verdict adopted from a subflow's child run. */
export interface ChildVerdict {
  passed: boolean;
  digest: string | null;
  childRunId: string;
}

export type AttemptOutcome =
  | { kind: 'ok'; output: string; outputBytes?: number; usage: Usage; durationMs: number; verify?: VerifyData; childVerdict?: ChildVerdict; extraOutputs?: Array<{ name: string; text: string }> }
  | {
      kind: 'failed';
      error: ErrorInfo;
      usage: Usage;
      durationMs: number;
      output?: string;
      outputBytes?: number;
      verify?: VerifyData;
      childVerdict?: ChildVerdict;
      retryable: boolean;
      /** The failure ends the run whatever the node's `onFailure` (a run-level budget breach). */
      failsRun?: boolean;
    }
  | { kind: 'lost'; reason: 'worker_lost' | 'heartbeat_timeout'; error: ErrorInfo; usage: Usage; durationMs: number }
  | { kind: 'stopped'; usage: Usage; durationMs: number }
  /** The scheduler took the slot back for foreground work; the node runs again later. */
  | { kind: 'preempted'; usage: Usage; durationMs: number };

/** The abort reason of an execution whose slot was taken back for foreground work. */
export const PREEMPTED = Symbol('preempted');

/** Failures that would fail again: never retried. */
const NOT_RETRYABLE: ReadonlySet<string> = new Set<ErrorCode>(['BUDGET_EXCEEDED', 'POLICY_DENIED', 'REQUEUE_LIMIT', 'ENGINE_UNSUPPORTED']);

/** Usage of one execution: what the host measured, or the worker reported where the host measured less. */
export function executionUsage(outcome: ExecutionOutcome): Usage {
  const reported = outcome.status === 'ok' || outcome.status === 'error' ? outcome.result.usage : undefined;
  const measured = outcome.measured;
  return {
    executions: 1,
    durationMs: Math.round(outcome.durationMs),
    cpuMs: Math.round(Math.max(reported?.cpuMs ?? 0, measured?.cpuMs ?? 0)),
    tokensIn: Math.max(reported?.tokensIn ?? 0, measured?.tokensIn ?? 0),
    tokensOut: Math.max(reported?.tokensOut ?? 0, measured?.tokensOut ?? 0),
    costUsd: Math.max(reported?.costUsd ?? 0, measured?.costUsd ?? 0),
    peakRssMb: Math.round(measured?.peakRssMb ?? 0),
  };
}

/** Convert a pool outcome. `timeoutMs` names the limit in a timeout's message. */
export function fromExecution(outcome: ExecutionOutcome, node: string, timeoutMs: number): AttemptOutcome {
  const usage = executionUsage(outcome);
  const durationMs = Math.round(outcome.durationMs);
  switch (outcome.status) {
    case 'ok': {
      const ok: AttemptOutcome = { kind: 'ok', output: outcome.result.output, usage, durationMs };
      if (outcome.result.outputBytes !== undefined) ok.outputBytes = outcome.result.outputBytes;
      if (outcome.result.verify !== undefined) ok.verify = outcome.result.verify;
      return ok;
    }
    case 'error': {
      const error: ErrorInfo = { code: outcome.result.code, message: outcome.result.message, node };
      if (outcome.result.detail !== undefined) error.detail = outcome.result.detail;
      const failed: AttemptOutcome = { kind: 'failed', error, usage, durationMs, retryable: !NOT_RETRYABLE.has(outcome.result.code) };
      if (outcome.result.output !== undefined) failed.output = outcome.result.output;
      if (outcome.result.outputBytes !== undefined) failed.outputBytes = outcome.result.outputBytes;
      if (outcome.result.verify !== undefined) failed.verify = outcome.result.verify;
      return failed;
    }
    case 'timeout':
      return {
        kind: 'failed',
        error: { code: 'TIMEOUT', message: `the attempt ran past timeoutMs (${timeoutMs} ms); its process tree was killed`, node, detail: { timeoutMs } },
        usage,
        durationMs,
        retryable: true,
      };
    case 'budget': {
      const { breach } = outcome;
      const whose = breach.scope === 'run' ? "the run's budget" : "the execution's budget";
      return {
        kind: 'failed',
        error: { code: 'BUDGET_EXCEEDED', message: `${whose} was exceeded: ${describeBreach(breach)}; the execution was stopped`, node, detail: { ...breach } },
        usage,
        durationMs,
        retryable: false,
        failsRun: breach.scope === 'run',
      };
    }
    case 'lost':
      return {
        kind: 'lost',
        reason: outcome.reason,
        error: { code: outcome.reason === 'heartbeat_timeout' ? 'HEARTBEAT_TIMEOUT' : 'WORKER_LOST', message: outcome.message, node },
        usage,
        durationMs,
      };
    case 'aborted':
      return outcome.reason === PREEMPTED ? { kind: 'preempted', usage, durationMs } : { kind: 'stopped', usage, durationMs };
  }
}

/** Sum usages. */
export function sumUsage(usages: readonly Usage[]): Usage {
  const total = emptyUsage();
  for (const u of usages) addUsage(total, u);
  return total;
}
