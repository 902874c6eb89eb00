/**
 * How a node's executions run: isolation, effective policy, budget, and the
 * worker that may take them — decided once per attempt and recorded with it.
 */
import { mergeBudgets, type Budget, type Measured } from '../../protocol/budget.js';
import type { Usage } from '../../protocol/events.js';
import { effectivePolicy, pathCovered, type EffectivePolicy, type Policy } from '../../protocol/policy.js';
import type { WorkflowNode, WorkflowSpec } from '../../protocol/spec.js';
import type { WorkerSpec } from '../pool/execution.js';
import type { Priority } from '../scheduler.js';
import { childProcessesSetting, isolationOf, workerSpec } from '../policy.js';

export interface ExecPlan {
  isolation: 'process' | 'thread';
  policy: EffectivePolicy;
  /** The execution's limits: the node's, over the spec's `executionBudget`, over the host's. */
  budget: Budget;
  worker: WorkerSpec;
  /** The node's `priority`, else the spec's, else foreground. */
  priority: Priority;
}

export function planExecution(runId: string, node: WorkflowNode, spec: WorkflowSpec, ceiling: EffectivePolicy, hostBudget: Budget): ExecPlan {
  const nodeFields = 'budget' in node || 'policy' in node ? (node as { budget?: Budget; policy?: Policy }) : {};
  const decided = effectivePolicy(ceiling, spec.policy, nodeFields.policy);
  const budget = mergeBudgets(nodeFields.budget, spec.executionBudget, hostBudget);
  const isolation = isolationOf(node, budget, decided, childProcessesSetting(ceiling, spec.policy, nodeFields.policy));
  // Recorded as it is held: a thread cannot deny child processes.
  const policy = isolation === 'thread' ? { ...decided, childProcesses: true } : decided;
  const priority = node.priority ?? spec.priority ?? 'foreground';
  return { isolation, policy, budget, priority, worker: workerSpec(runId, node, isolation, policy, budget, node.kind === 'script' ? node.module : undefined) };
}

/** A run's usage as the figures budgets compare. */
export function runUsed(usage: Usage): Measured {
  return { wallMs: usage.durationMs, cpuMs: usage.cpuMs, rssMb: usage.peakRssMb, tokens: usage.tokensIn + usage.tokensOut, costUsd: usage.costUsd };
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
