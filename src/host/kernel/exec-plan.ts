/**
 * How a node's executions run: isolation, effective policy, budget, and the
 * worker that may take them — decided once per attempt and recorded with it.
 */
import { mergeBudgets, type Budget } from '../../protocol/budget.js';
import type { Usage } from '../../protocol/events.js';
import { effectivePolicy, pathCovered, type EffectivePolicy } from '../../protocol/policy.js';
import type { WorkflowNode, WorkflowSpec } from '../../protocol/spec.js';
import type { WorkerSpec } from '../pool/execution.js';
import { isolationOf, workerSpec } from '../policy.js';

export interface ExecPlan {
  isolation: 'process' | 'thread';
  policy: EffectivePolicy;
  /** The execution's limits: the node's, over the spec's `executionBudget`, over the host's. */
  budget: Budget;
  worker: WorkerSpec;
}

export function planExecution(node: WorkflowNode, spec: WorkflowSpec, ceiling: EffectivePolicy, hostBudget: Budget): ExecPlan {
  const nodeFields = 'budget' in node || 'policy' in node ? (node as { budget?: Budget; policy?: import('../../protocol/policy.js').Policy }) : {};
  const policy = effectivePolicy(ceiling, spec.policy, nodeFields.policy);
  const budget = mergeBudgets(nodeFields.budget, spec.executionBudget, hostBudget);
  const isolation = isolationOf(node, budget, policy);
  return { isolation, policy, budget, worker: workerSpec(node, isolation, policy, budget, node.kind === 'script' ? node.module : undefined) };
}

/** What is left of a run's budget after `usage` (`rssMb` is a ceiling on every execution, not a sum). */
export function remainingRunBudget(budget: Budget | undefined, usage: Usage): Budget {
  const left: Budget = {};
  if (budget === undefined) return left;
  if (budget.wallMs !== undefined) left.wallMs = budget.wallMs - usage.durationMs;
  if (budget.cpuMs !== undefined) left.cpuMs = budget.cpuMs - usage.cpuMs;
  if (budget.tokens !== undefined) left.tokens = budget.tokens - usage.tokensIn - usage.tokensOut;
  if (budget.costUsd !== undefined) left.costUsd = budget.costUsd - usage.costUsd;
  if (budget.rssMb !== undefined) left.rssMb = budget.rssMb;
  return left;
}

/** The run limit already used up, if one is: the run cannot start another execution. */
export function exhaustedRunLimit(budget: Budget | undefined, usage: Usage): { limit: keyof Budget; limitValue: number; measured: number } | undefined {
  if (budget === undefined) return undefined;
  const used: Record<keyof Budget, number> = { wallMs: usage.durationMs, cpuMs: usage.cpuMs, tokens: usage.tokensIn + usage.tokensOut, costUsd: usage.costUsd, rssMb: usage.peakRssMb };
  for (const limit of ['wallMs', 'cpuMs', 'tokens', 'costUsd'] as const) {
    const value = budget[limit];
    if (value !== undefined && used[limit] >= value) return { limit, limitValue: value, measured: used[limit] };
  }
  return undefined;
}

/** Why the policy refuses a working directory, if it does: it must lie within the paths the execution may read or write. */
export function cwdRefusal(policy: EffectivePolicy, cwd: string): string | undefined {
  if (pathCovered([...policy.fs.read, ...policy.fs.write], cwd)) return undefined;
  return `the working directory ${cwd} is outside the paths the policy allows (fs.read: ${policy.fs.read.join(', ')}; fs.write: ${policy.fs.write.join(', ')})`;
}
