/**
 * Budgets: limits on one execution (node `budget`, defaults from the spec's
 * `executionBudget` and the host's) or on a whole run (spec `budget`, summed
 * over every attempt). Breaching one stops the execution and fails the
 * attempt with `BUDGET_EXCEEDED`; a breach is never retried (it would breach
 * again), and a run-level breach fails the run.
 */
import { z } from 'zod';
import { durationMs } from './fields.js';

export const BudgetSchema = z.strictObject({
  /** Wall-clock time of one execution (or of all of a run's executions), in ms. */
  wallMs: durationMs.optional(),
  /** CPU time of the worker's whole process tree, in ms (sampled; not measurable in a thread). */
  cpuMs: z.number().int().min(1).max(30 * 24 * 3_600_000).optional(),
  /** Resident memory of the worker's whole process tree, in MB (in a thread: the JS heap limit). */
  rssMb: z.number().int().min(16, 'must be at least 16 MB').max(1_048_576).optional(),
  /** Tokens in + out, from usage reports. */
  tokens: z.number().int().min(1).optional(),
  /** Cost in USD, from usage reports. */
  costUsd: z.number().gt(0, 'must be more than 0').max(1_000_000).optional(),
});
export type Budget = z.infer<typeof BudgetSchema>;
export type BudgetLimit = keyof Budget;

export const BUDGET_LIMITS: readonly BudgetLimit[] = ['wallMs', 'cpuMs', 'rssMb', 'tokens', 'costUsd'];

/** Field-wise: the first level that sets a limit wins (node, then spec default, then host default). */
export function mergeBudgets(...levels: Array<Budget | undefined>): Budget {
  const merged: Budget = {};
  for (const limit of BUDGET_LIMITS) {
    for (const level of levels) {
      const value = level?.[limit];
      if (value !== undefined) {
        merged[limit] = value;
        break;
      }
    }
  }
  return merged;
}

/** What a usage measurement holds, for comparing against a budget. */
export interface Measured {
  wallMs: number;
  cpuMs: number;
  rssMb: number;
  tokens: number;
  costUsd: number;
}

/** The first limit `measured` exceeds, or undefined. */
export function firstBreach(budget: Budget, measured: Measured): { limit: BudgetLimit; limitValue: number; measured: number } | undefined {
  for (const limit of BUDGET_LIMITS) {
    const limitValue = budget[limit];
    if (limitValue !== undefined && measured[limit] > limitValue) return { limit, limitValue, measured: measured[limit] };
  }
  return undefined;
}

const UNITS: Record<BudgetLimit, string> = { wallMs: 'ms', cpuMs: 'ms', rssMb: 'MB', tokens: 'tokens', costUsd: 'USD' };

/** `cpuMs 5012 ms > 5000 ms`; a thread's heap limit: `rssMb: the thread ran out of its 64 MB heap`. */
export function describeBreach(breach: { limit: BudgetLimit; limitValue: number; measured: number }): string {
  const unit = UNITS[breach.limit];
  if (breach.limit === 'rssMb' && breach.measured === breach.limitValue) return `rssMb: it ran out of its ${breach.limitValue} MB heap`;
  const fmt = (n: number): string => (breach.limit === 'costUsd' ? n.toFixed(4) : String(Math.round(n)));
  return `${breach.limit} ${fmt(breach.measured)} ${unit} > ${fmt(breach.limitValue)} ${unit}`;
}
