/**
 * Router conditions: closed forms only. Routing is data, never code — a spec can
 * arrive from an agent, so no expression language is accepted anywhere.
 */
import { z } from 'zod';

/** The deepest `and` nesting accepted (a bare condition has depth 1). */
export const MAX_CONDITION_DEPTH = 6;

const nodeRef = z.string().min(1, 'must name a node');

const conditionTypes = ['always', 'node_failed', 'node_succeeded', 'verified', 'visits_lt', 'and'] as const;

/**
 * `{type:'always'}`, `{type:'node_failed', node}`, `{type:'node_succeeded', node}`,
 * `{type:'verified', node}`, `{type:'visits_lt', node, n}` and `{type:'and', all:[…]}`.
 * An empty `and` is false.
 */
export const ConditionSchema = z.discriminatedUnion(
  'type',
  [
    z.strictObject({ type: z.literal('always') }),
    z.strictObject({ type: z.literal('node_failed'), node: nodeRef }),
    z.strictObject({ type: z.literal('node_succeeded'), node: nodeRef }),
    z.strictObject({ type: z.literal('verified'), node: nodeRef }),
    z.strictObject({
      type: z.literal('visits_lt'),
      node: nodeRef,
      n: z.number().int('must be an integer').min(1, 'must be at least 1'),
    }),
    z.strictObject({
      type: z.literal('and'),
      get all(): z.ZodArray<typeof ConditionSchema> {
        return z.array(ConditionSchema);
      },
    }),
  ],
  {
    error: (issue) =>
      (issue.code as string) === 'invalid_type'
        ? `expected a condition object {type: ${conditionTypes.join(' | ')}}; expressions and strings are not accepted`
        : issue.code === 'invalid_union'
          ? `unknown condition type; expected one of ${conditionTypes.join(', ')}`
          : undefined,
  },
);

/** A router condition. */
export type Condition = z.infer<typeof ConditionSchema>;

/** Nesting depth of a condition: 1 for a leaf, 1 + the deepest member for `and`. */
export function conditionDepth(c: Condition): number {
  if (c.type !== 'and') return 1;
  return 1 + c.all.reduce((max, child) => Math.max(max, conditionDepth(child)), 0);
}

/** Every node id a condition names, with the dotted path (relative to the condition) where it appears. */
export function conditionNodeRefs(c: Condition, path: string): Array<{ node: string; path: string; type: Condition['type'] }> {
  if (c.type === 'always') return [];
  if (c.type === 'and') return c.all.flatMap((child, i) => conditionNodeRefs(child, `${path}.all[${i}]`));
  return [{ node: c.node, path: `${path}.node`, type: c.type }];
}

/** What a condition needs to know about a run to be evaluated. */
export interface ConditionFacts {
  /** The last finished state of a node: 'succeeded' | 'failed' | other. */
  lastResult(node: string): 'succeeded' | 'failed' | undefined;
  /** Whether the node's latest verdict passed. */
  verified(node: string): boolean;
  /** How many times the node has been entered. */
  visits(node: string): number;
}

/** Evaluate a condition against a run. Pure. */
export function evaluateCondition(c: Condition, facts: ConditionFacts): boolean {
  switch (c.type) {
    case 'always':
      return true;
    case 'node_failed':
      return facts.lastResult(c.node) === 'failed';
    case 'node_succeeded':
      return facts.lastResult(c.node) === 'succeeded';
    case 'verified':
      return facts.verified(c.node);
    case 'visits_lt':
      return facts.visits(c.node) < c.n;
    case 'and':
      return c.all.length > 0 && c.all.every((child) => evaluateCondition(child, facts));
  }
}
