/**
 * Run events: what `events.jsonl` holds and what followers receive.
 *
 * Events are the durable truth of a run. The run record (`run.json`) is a
 * checkpoint of folding them in order (see `record.ts`), so a lost or torn
 * record is rebuilt exactly by replaying the events against the spec.
 * Every event carries a `seq` (1, 2, 3, … with no gaps) and an ISO `ts`.
 */
import { z } from 'zod';

export const RUN_STATES = ['pending', 'running', 'awaiting_human', 'verifying', 'completed', 'failed', 'cancelled'] as const;
/**
 * - `pending`: created, no step taken yet.
 * - `running`: a node is being decided or executed.
 * - `awaiting_human`: parked at a human gate until approve/reject.
 * - `verifying`: a verifier runs, or the run is at its terminal barrier.
 * - `completed`: ended from `verifying`; see the outcome.
 * - `failed`, `cancelled`: ended.
 */
export type RunState = (typeof RUN_STATES)[number];
export const RunStateSchema = z.enum(RUN_STATES);

export const RUN_OUTCOMES = ['verified', 'unverified', 'refuted'] as const;
/** `verified`: the last verdict passed and still describes the tree; `refuted`: it failed; `unverified`: nothing vouches. */
export type RunOutcome = (typeof RUN_OUTCOMES)[number];
export const RunOutcomeSchema = z.enum(RUN_OUTCOMES);

export const TERMINAL_STATES: ReadonlySet<RunState> = new Set(['completed', 'failed', 'cancelled']);

/** An error as recorded on a run or attempt. */
export const ErrorInfoSchema = z.strictObject({
  code: z.string(),
  message: z.string(),
  node: z.string().optional(),
  /** Extra figures (exit code, limit and measured value, …). */
  detail: z.record(z.string(), z.unknown()).optional(),
});
export type ErrorInfo = z.infer<typeof ErrorInfoSchema>;

/** Resource usage of one execution, or summed over a run. */
export const UsageSchema = z.strictObject({
  executions: z.number().int().min(0).default(0),
  durationMs: z.number().min(0).default(0),
  cpuMs: z.number().min(0).default(0),
  tokensIn: z.number().min(0).default(0),
  tokensOut: z.number().min(0).default(0),
  costUsd: z.number().min(0).default(0),
  /** The largest resident memory measured, in MB (a maximum, not a sum). */
  peakRssMb: z.number().min(0).default(0),
});
export type Usage = z.infer<typeof UsageSchema>;

/** The effective policy an attempt ran under, as recorded with it. */
export const EffectivePolicySchema = z.strictObject({
  env: z.strictObject({ allow: z.array(z.string()), set: z.record(z.string(), z.string()) }),
  fs: z.strictObject({ read: z.array(z.string()), write: z.array(z.string()) }),
  commands: z.array(z.string()),
  childProcesses: z.boolean(),
});

/** A reference to a node output stored as an artifact. */
export const OutputRefSchema = z.strictObject({
  artifact: z.string(),
  bytes: z.number().int().min(0),
  /** The first characters of the output (at most {@link OUTPUT_PREVIEW_CHARS}). */
  preview: z.string(),
  /** Set when the program wrote more than a worker keeps (the last 1 MiB): how much it wrote in all. */
  totalBytes: z.number().int().min(0).optional(),
});
export type OutputRef = z.infer<typeof OutputRefSchema>;

/** Outputs longer than this are kept whole only in their artifact. */
export const OUTPUT_PREVIEW_CHARS = 2000;

/** A secret a run needs re-supplied on resume: where it sits in the spec and which keys. */
export const SecretRefSchema = z.strictObject({
  ref: z.string(),
  label: z.string(),
  keys: z.array(z.string()),
});
export type SecretRef = z.infer<typeof SecretRefSchema>;

const base = { seq: z.number().int().min(1), ts: z.string() };
const node = z.string();
const attempt = z.number().int().min(1);

export const RunEventSchema = z.discriminatedUnion('type', [
  z.strictObject({
    ...base,
    type: z.literal('run_created'),
    runId: z.string(),
    name: z.string(),
    incarnationId: z.string(),
    cwd: z.string(),
    parentRunId: z.string().optional(),
    parentNode: z.string().optional(),
    depth: z.number().int().min(0),
    nodes: z.array(z.string()),
    first: z.string(),
    secrets: z.array(SecretRefSchema),
  }),
  z.strictObject({
    ...base,
    type: z.literal('run_state'),
    state: RunStateSchema,
    outcome: RunOutcomeSchema.optional(),
    reason: z.string().optional(),
    error: ErrorInfoSchema.optional(),
  }),
  z.strictObject({
    ...base,
    type: z.literal('node_started'),
    node,
    attempt,
    visit: z.number().int().min(1),
    /** Why this attempt exists: a new visit, a retry after failure, a re-queue after a lost claim, or a resume after an interruption. */
    /** `preempted`: again after giving its slot to foreground work (counts as neither a retry nor a re-queue). */
    cause: z.enum(['visit', 'retry', 'requeue', 'resume', 'preempted']),
    executions: z.array(z.string()),
    steer: z.strictObject({ ids: z.array(z.string()), text: z.string() }).optional(),
    childRunId: z.string().optional(),
    /** Where the executions run, and the effective policy they run under. */
    isolation: z.enum(['process', 'thread']).optional(),
    policy: EffectivePolicySchema.optional(),
  }),
  z.strictObject({
    ...base,
    type: z.literal('node_requeued'),
    node,
    attempt,
    /** `preempted`: the slot went to foreground work; the node runs again without using a retry or a re-queue. */
    reason: z.enum(['worker_lost', 'heartbeat_timeout', 'host_lost', 'preempted']),
    error: ErrorInfoSchema,
    /** What the lost attempt was measured to use before it was lost: it counts toward the run's budget. */
    usage: UsageSchema.optional(),
  }),
  z.strictObject({ ...base, type: z.literal('node_interrupted'), node, attempt, reason: z.string(), usage: UsageSchema.optional() }),
  z.strictObject({
    ...base,
    type: z.literal('node_succeeded'),
    node,
    attempt,
    durationMs: z.number().min(0),
    output: OutputRefSchema.optional(),
    usage: UsageSchema.optional(),
    next: z.string().nullable(),
  }),
  z.strictObject({
    ...base,
    type: z.literal('node_failed'),
    node,
    attempt,
    durationMs: z.number().min(0),
    error: ErrorInfoSchema,
    output: OutputRefSchema.optional(),
    usage: UsageSchema.optional(),
    /** Set when the node will be retried after this delay. */
    retryInMs: z.number().int().min(0).optional(),
    /** Where the run goes next; absent when the failure ends the run. */
    next: z.string().nullable().optional(),
  }),
  z.strictObject({ ...base, type: z.literal('node_cancelled'), node, attempt: attempt.optional(), usage: UsageSchema.optional() }),
  z.strictObject({
    ...base,
    type: z.literal('node_routed'),
    node,
    visit: z.number().int().min(1),
    to: z.string().nullable(),
    route: z.union([z.number().int().min(0), z.literal('default'), z.literal('next')]),
  }),
  z.strictObject({ ...base, type: z.literal('gate_opened'), node, visit: z.number().int().min(1), prompt: z.string() }),
  z.strictObject({
    ...base,
    type: z.literal('gate_closed'),
    node,
    approved: z.boolean(),
    controlId: z.string(),
    /** Where the run goes next; absent when a rejection ends the run. */
    next: z.string().nullable().optional(),
  }),
  z.strictObject({
    ...base,
    type: z.literal('control'),
    controlId: z.string(),
    action: z.enum(['cancel', 'steer', 'approve', 'reject']),
    text: z.string().optional(),
    applied: z.boolean(),
    reason: z.string().optional(),
  }),
  z.strictObject({
    ...base,
    type: z.literal('evidence'),
    node,
    attempt,
    evidenceId: z.string().optional(),
    passed: z.boolean(),
    digest: z.string().nullable(),
    childRunId: z.string().optional(),
  }),
  z.strictObject({
    ...base,
    type: z.literal('log'),
    level: z.enum(['debug', 'info', 'warn', 'error']),
    message: z.string(),
    node: z.string().optional(),
  }),
]);

export type RunEvent = z.infer<typeof RunEventSchema>;

/** A control request waiting in a run's inbox until its owner applies it (written by any process: validated when read). */
export const ControlRequestSchema = z.strictObject({
  id: z.string().regex(/^[A-Za-z0-9-]{1,64}$/, 'must be 1-64 letters, digits or dashes'),
  action: z.enum(['cancel', 'steer', 'approve', 'reject']),
  text: z.string().max(100_000, 'must be at most 100000 characters').optional(),
  /** ISO time of posting. */
  at: z.string(),
  from: z.strictObject({ pid: z.number().int(), host: z.string() }),
});
export type ControlRequest = z.infer<typeof ControlRequestSchema>;
export type RunEventType = RunEvent['type'];
export type EventOf<T extends RunEventType> = Extract<RunEvent, { type: T }>;
/** An event before the store-facing fields (`seq`, `ts`) are assigned. */
export type NewRunEvent = RunEvent extends infer E ? (E extends RunEvent ? Omit<E, 'seq' | 'ts'> : never) : never;
