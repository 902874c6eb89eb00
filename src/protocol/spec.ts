/**
 * The workflow spec: schemas, the types inferred from them, and validation.
 *
 * The format is the one of the durable run kernel runwarden descends from
 * (`name`, `cwd`, `maxNodeVisits`, `contract`, `nodes[]` with the kinds
 * `command`, `agent`, `fanout`, `verifier`, `human_gate`, `router`, `subflow`),
 * accepted as written. Unknown fields are rejected with their path.
 */
import { z } from 'zod';
import { ConditionSchema, MAX_CONDITION_DEPTH, conditionDepth, conditionNodeRefs } from './conditions.js';
import { ContractSchema, type Contract } from './contract.js';
import { SpecError } from './errors.js';
import { BudgetSchema } from './budget.js';
import { DEFAULT_MAX_NODE_VISITS, durationMs, envMap, jsonValue, nodeId, nonEmpty } from './fields.js';
import { PolicySchema } from './policy.js';
import { zodIssues } from './validation.js';

export { CheckSchema, CommandCheckSchema, ContractSchema, FileCheckSchema, type Check, type Contract } from './contract.js';
export { DEFAULT_CHECK_TIMEOUT_MS, DEFAULT_MAX_NODE_VISITS, MAX_TIMEOUT_MS } from './fields.js';
export { formatPath, zodIssues } from './validation.js';

// ---------------------------------------------------------------- nodes

const engineName = z.enum(['claude', 'codex', 'gemini', 'custom']);

/** A custom agent CLI. `args` may contain `{prompt}`, `{cwd}` and `{model}`. `env` is a secret. */
export const CustomEngineSchema = z.strictObject({
  bin: nonEmpty,
  args: z.array(z.string()).default([]),
  env: envMap.optional(),
  /** How the prompt reaches the CLI. @default 'arg' */
  promptVia: z.enum(['arg', 'stdin']).default('arg'),
});

const retry = z.strictObject({
  max: z.number().int('must be an integer').min(0, 'must be at least 0').max(100, 'must be at most 100'),
  /** Base delay before a retry; doubles per retry, capped at 5 minutes. @default 1000 */
  backoffMs: z.number().int().min(0).max(3_600_000).default(1000),
});

const base = {
  id: nodeId,
  next: z.string().optional(),
  retry: retry.optional(),
  timeoutMs: durationMs.optional(),
  onFailure: z.enum(['fail', 'continue']).optional(),
  maxRequeues: z.number().int().min(0).max(100).optional(),
  /** Overrides the spec's `priority` for this node's executions. */
  priority: z.enum(['foreground', 'background']).optional(),
};

/** Fields of nodes whose attempts run in a worker. */
const execution = {
  /** Where the attempt runs. @default 'thread' for `script` (but 'process' under an rssMb or cpuMs budget, or a fs policy), else 'process' */
  isolation: z.enum(['process', 'thread']).optional(),
  /** Limits on each execution, over the spec's `executionBudget` and the host's. */
  budget: BudgetSchema.optional(),
  /** Narrows the spec's policy for this node. */
  policy: PolicySchema.optional(),
};

export const CommandNodeSchema = z.strictObject({
  ...base,
  ...execution,
  kind: z.literal('command'),
  cmd: nonEmpty,
  args: z.array(z.string()).default([]),
  cwd: z.string().optional(),
  env: envMap.optional(),
});

const agentFields = {
  engine: engineName.default('claude'),
  model: z.string().min(1).optional(),
  customEngine: CustomEngineSchema.optional(),
  permissionMode: z.string().min(1).optional(),
  effort: z.string().min(1).optional(),
};

export const AgentNodeSchema = z.strictObject({
  ...base,
  ...execution,
  kind: z.literal('agent'),
  prompt: nonEmpty,
  cwd: z.string().optional(),
  ...agentFields,
});

export const FanoutMemberSchema = z.strictObject({
  name: nodeId,
  prompt: nonEmpty.optional(),
  persona: z.string().optional(),
  ...agentFields,
});

export const FanoutNodeSchema = z.strictObject({
  ...base,
  ...execution,
  kind: z.literal('fanout'),
  prompt: nonEmpty,
  cwd: z.string().optional(),
  agents: z.array(FanoutMemberSchema).min(1, 'a fan-out needs at least one agent'),
  /** Run one more turn that merges the members' outputs. @default false */
  synthesize: z.boolean().default(false),
  /** The agent that synthesizes; defaults to the first member. */
  synthesizer: z.strictObject({ engine: engineName.default('claude'), model: z.string().optional(), customEngine: CustomEngineSchema.optional() }).optional(),
});

export const VerifierNodeSchema = z.strictObject({
  ...base,
  ...execution,
  kind: z.literal('verifier'),
  contract: z.union([z.literal('run'), ContractSchema], { error: "expected 'run' or an inline contract {checks: [...]}" }),
  cwd: z.string().optional(),
});

export const HumanGateNodeSchema = z.strictObject({
  ...base,
  kind: z.literal('human_gate'),
  prompt: nonEmpty,
});

export const RouterNodeSchema = z.strictObject({
  ...base,
  kind: z.literal('router'),
  routes: z.array(z.strictObject({ when: ConditionSchema, to: nonEmpty })).min(1, 'a router needs at least one route'),
  default: z.string().optional(),
});

export const SubflowNodeSchema = z.strictObject({
  ...base,
  kind: z.literal('subflow'),
  /** An inline spec, or the path of a spec file (resolved against the parent spec's directory). */
  get workflow(): z.ZodUnion<[z.ZodString, typeof WorkflowSpecSchema]> {
    return z.union([nonEmpty, WorkflowSpecSchema], { error: 'expected an inline workflow spec or the path of a spec file' });
  },
});

/**
 * Runs a function of a JavaScript module in a worker with a context
 * `{ input, signal, heartbeat, reportUsage, log, cwd, attempt }`; its
 * JSON-serialisable return value is the output.
 */
export const ScriptNodeSchema = z.strictObject({
  ...base,
  ...execution,
  kind: z.literal('script'),
  /** The module's path (relative to the spec file) or file URL. */
  module: nonEmpty,
  /** The export to call. @default 'default' */
  export: z.string().regex(/^[A-Za-z_$][A-Za-z0-9_$]*$/, 'must be an identifier').default('default'),
  input: jsonValue.optional(),
  cwd: z.string().optional(),
});

const nodeKinds = ['command', 'agent', 'fanout', 'verifier', 'script', 'human_gate', 'router', 'subflow'] as const;

export const NodeSchema = z.discriminatedUnion(
  'kind',
  [CommandNodeSchema, AgentNodeSchema, FanoutNodeSchema, VerifierNodeSchema, ScriptNodeSchema, HumanGateNodeSchema, RouterNodeSchema, SubflowNodeSchema],
  {
    error: (issue) =>
      issue.code === 'invalid_union'
        ? `unknown node kind; expected one of ${nodeKinds.join(', ')}`
        : issue.code === 'invalid_type'
          ? 'expected a node object'
          : undefined,
  },
);

// ---------------------------------------------------------------- the spec

export const WorkflowSpecSchema = z
  .strictObject({
    name: z.string().min(1, 'must not be empty').max(200, 'must be at most 200 characters'),
    description: z.string().optional(),
    cwd: z.string().min(1).optional(),
    /** The bound on visits of any one node. @default 50 */
    maxNodeVisits: z.number().int().min(1).max(100_000).default(DEFAULT_MAX_NODE_VISITS),
    contract: ContractSchema.optional(),
    /** Limits on the whole run: the same figures summed over every attempt. */
    budget: BudgetSchema.optional(),
    /** Default limits of each execution (a node's `budget` overrides them field by field). */
    executionBudget: BudgetSchema.optional(),
    /** The policy of every execution; narrows the host's ceiling. */
    policy: PolicySchema.optional(),
    /**
     * `background` executions give their slot to waiting `foreground` ones (they are
     * preempted and run again later, without using a retry). @default 'foreground'
     */
    priority: z.enum(['foreground', 'background']).optional(),
    get nodes(): z.ZodArray<typeof NodeSchema> {
      return z.array(NodeSchema).min(1, 'a workflow needs at least one node');
    },
  })
  .superRefine((spec, ctx) => {
    for (const issue of crossReferenceIssues(spec)) ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path });
  });

export type WorkflowSpec = z.infer<typeof WorkflowSpecSchema>;
/** The spec as a user writes it, before defaults. */
export type WorkflowSpecInput = z.input<typeof WorkflowSpecSchema>;
export type WorkflowNode = z.infer<typeof NodeSchema>;
export type NodeKind = WorkflowNode['kind'];
export type CustomEngine = z.infer<typeof CustomEngineSchema>;
export type FanoutMember = z.infer<typeof FanoutMemberSchema>;
export type NodeOf<K extends NodeKind> = Extract<WorkflowNode, { kind: K }>;

/** Node kinds whose attempts run in a worker. */
export const EXECUTING_KINDS: ReadonlySet<NodeKind> = new Set(['command', 'agent', 'fanout', 'verifier', 'script']);
/** Node kinds that may change the workspace; a verdict older than one of these is re-checked at the end. */
export const WORKSPACE_KINDS: ReadonlySet<NodeKind> = new Set(['command', 'agent', 'fanout', 'script', 'subflow']);

/** Cross-field rules zod cannot express per field. Paths are zod-style arrays. */
function crossReferenceIssues(spec: {
  contract?: unknown;
  nodes: ReadonlyArray<Record<string, unknown> & { id: string; kind: string }>;
}): Array<{ path: Array<string | number>; message: string }> {
  const issues: Array<{ path: Array<string | number>; message: string }> = [];
  const index = new Map<string, number>();
  spec.nodes.forEach((node, i) => {
    const first = index.get(node.id);
    if (first !== undefined) issues.push({ path: ['nodes', i, 'id'], message: `duplicate node id '${node.id}' (first used by nodes[${first}])` });
    else index.set(node.id, i);
  });
  const refersTo = (target: unknown, path: Array<string | number>, what: string): void => {
    if (typeof target === 'string' && !index.has(target)) {
      issues.push({ path, message: `${what} '${target}' is not a node of this workflow (nodes: ${[...index.keys()].join(', ')})` });
    }
  };
  spec.nodes.forEach((node, i) => {
    refersTo(node.next, ['nodes', i, 'next'], 'next');
    if (node.isolation === 'thread' && node.kind !== 'script') {
      issues.push({ path: ['nodes', i, 'isolation'], message: `a ${node.kind} node starts programs and runs in a process; only script nodes may run in a thread` });
    }
    if (node.kind === 'router') {
      const routes = node.routes as Array<{ when: z.infer<typeof ConditionSchema>; to: string }>;
      routes.forEach((route, r) => {
        refersTo(route.to, ['nodes', i, 'routes', r, 'to'], 'route target');
        if (conditionDepth(route.when) > MAX_CONDITION_DEPTH) {
          issues.push({ path: ['nodes', i, 'routes', r, 'when'], message: `conditions nest at most ${MAX_CONDITION_DEPTH} deep` });
        }
        for (const ref of conditionNodeRefs(route.when, 'when')) {
          const path = ['nodes', i, 'routes', r, ...ref.path.split('.').flatMap(splitIndex)];
          const target = index.get(ref.node);
          if (target === undefined) refersTo(ref.node, path, 'condition node');
          else if (ref.type === 'verified' && !['verifier', 'subflow'].includes(spec.nodes[target]!.kind)) {
            issues.push({ path, message: `'verified' needs a verifier or subflow node; '${ref.node}' is a ${spec.nodes[target]!.kind}` });
          }
        }
      });
      refersTo(node.default, ['nodes', i, 'default'], 'default');
    }
    if (node.kind === 'verifier' && node.contract === 'run' && spec.contract === undefined) {
      issues.push({ path: ['nodes', i, 'contract'], message: "'run' uses the workflow's contract, but the workflow has no top-level contract" });
    }
    if (node.kind === 'agent') agentIssues(node, ['nodes', i], issues);
    if (node.kind === 'fanout') {
      const members = node.agents as Array<Record<string, unknown> & { name: string }>;
      const seen = new Set<string>();
      members.forEach((member, m) => {
        if (seen.has(member.name)) issues.push({ path: ['nodes', i, 'agents', m, 'name'], message: `duplicate fan-out member '${member.name}'` });
        seen.add(member.name);
        agentIssues(member, ['nodes', i, 'agents', m], issues);
      });
      if (node.synthesizer !== undefined) agentIssues(node.synthesizer as Record<string, unknown>, ['nodes', i, 'synthesizer'], issues);
    }
    const checks = node.kind === 'verifier' && typeof node.contract === 'object' ? (node.contract as { checks: Array<{ id?: string }> }).checks : undefined;
    if (checks !== undefined) checkIdIssues(checks, ['nodes', i, 'contract', 'checks'], issues);
  });
  if (typeof spec.contract === 'object' && spec.contract !== null) {
    checkIdIssues((spec.contract as { checks: Array<{ id?: string }> }).checks, ['contract', 'checks'], issues);
  }
  return issues;
}

function splitIndex(segment: string): Array<string | number> {
  const m = /^(\w+)\[(\d+)\]$/.exec(segment);
  return m ? [m[1]!, Number(m[2])] : [segment];
}

function agentIssues(agent: Record<string, unknown>, path: Array<string | number>, issues: Array<{ path: Array<string | number>; message: string }>): void {
  if (agent.engine === 'custom' && agent.customEngine === undefined) {
    issues.push({ path: [...path, 'customEngine'], message: "engine 'custom' needs a customEngine {bin, args}" });
  }
  if (agent.engine !== 'custom' && agent.customEngine !== undefined) {
    issues.push({ path: [...path, 'customEngine'], message: `customEngine is only used with engine 'custom' (engine is '${String(agent.engine)}')` });
  }
}

function checkIdIssues(checks: Array<{ id?: string }>, path: Array<string | number>, issues: Array<{ path: Array<string | number>; message: string }>): void {
  const seen = new Set<string>();
  checks.forEach((check, c) => {
    if (check.id === undefined) return;
    if (seen.has(check.id)) issues.push({ path: [...path, c, 'id'], message: `duplicate check id '${check.id}'` });
    seen.add(check.id);
  });
}

/**
 * Validate a spec and apply defaults. Does not read files (subflow paths stay
 * paths) and does not compile (see {@link compileSpec}).
 * @throws {SpecError} `SPEC_INVALID` listing every problem with its field path.
 */
export function parseWorkflowSpec(input: unknown, what = 'workflow spec'): WorkflowSpec {
  const result = WorkflowSpecSchema.safeParse(input);
  if (!result.success) throw new SpecError(zodIssues(result.error), what);
  return result.data;
}

/** The id given to the implicit final verifier. */
export const IMPLICIT_VERIFIER_ID = '__verify';

/**
 * Compile a validated spec into the form a run executes and stores: an implicit
 * final verifier is appended when the spec has a contract and no verifier uses
 * `contract: 'run'`, and every check gets an id (`<type>-<index>` unless set).
 * Pure and idempotent; nested inline subflows are compiled too.
 */
export function compileSpec(spec: WorkflowSpec): WorkflowSpec {
  const nodes = spec.nodes.map((node): WorkflowNode => {
    if (node.kind === 'verifier' && node.contract !== 'run') return { ...node, contract: withCheckIds(node.contract) };
    if (node.kind === 'subflow' && typeof node.workflow === 'object') return { ...node, workflow: compileSpec(node.workflow) };
    return node;
  });
  const contract = spec.contract === undefined ? undefined : withCheckIds(spec.contract);
  if (contract !== undefined && !nodes.some((n) => n.kind === 'verifier' && n.contract === 'run')) {
    let id = IMPLICIT_VERIFIER_ID;
    for (let i = 2; nodes.some((n) => n.id === id); i++) id = `${IMPLICIT_VERIFIER_ID}_${i}`;
    nodes.push({ id, kind: 'verifier', contract: 'run' });
  }
  return contract === undefined ? { ...spec, nodes } : { ...spec, contract, nodes };
}

function withCheckIds(contract: Contract): Contract {
  const taken = new Set(contract.checks.map((c) => c.id).filter((id): id is string => id !== undefined));
  const checks = contract.checks.map((check, i) => {
    if (check.id !== undefined) return check;
    let id = `${check.type}-${i + 1}`;
    for (let n = 2; taken.has(id); n++) id = `${check.type}-${i + 1}-${n}`;
    taken.add(id);
    return { ...check, id };
  });
  return { ...contract, checks };
}

/** The node that follows `nodeId` when nothing routes elsewhere: its `next`, else the next in array order, else null (the end). */
export function followingNode(spec: WorkflowSpec, nodeId: string): string | null {
  const i = spec.nodes.findIndex((n) => n.id === nodeId);
  const node = spec.nodes[i];
  if (node === undefined) return null;
  if (node.next !== undefined) return node.next;
  return spec.nodes[i + 1]?.id ?? null;
}

/** Find a node by id. */
export function findNode(spec: WorkflowSpec, nodeId: string): WorkflowNode | undefined {
  return spec.nodes.find((n) => n.id === nodeId);
}
