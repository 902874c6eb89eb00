/**
 * The host <-> worker protocol: one discriminated union per direction, every
 * message versioned and validated with zod on both sides. Every message about
 * an execution carries its `executionId` and the `fence` of the claim, and the
 * host drops any message that does not match a live claim.
 */
import { z } from 'zod';
import { ERROR_CODES, type ErrorCode } from './errors.js';
import { CheckSchema, CustomEngineSchema } from './spec.js';

/** Error codes a worker may report: the closed registry. */
const errorCode = z.enum(Object.keys(ERROR_CODES) as [ErrorCode, ...ErrorCode[]]);

/** The protocol version. A worker refuses a dispatch of another version. */
export const IPC_VERSION = 1;

const v = z.literal(IPC_VERSION);
const executionId = z.string().min(1);
const fence = z.number().int().min(0);
const env = z.record(z.string(), z.string());

// ---------------------------------------------------------------- tasks

/** Run a program (argv, never a shell string); the output is its stdout. */
export const CommandTaskSchema = z.strictObject({
  kind: z.literal('command'),
  cmd: z.string().min(1),
  args: z.array(z.string()),
  cwd: z.string(),
  env: env.optional(),
});

/** One agent turn through an engine; the output is the final text. */
export const AgentTaskSchema = z.strictObject({
  kind: z.literal('agent'),
  engine: z.enum(['claude', 'codex', 'gemini', 'custom']),
  prompt: z.string(),
  cwd: z.string(),
  model: z.string().optional(),
  /** With engine `custom`: the CLI, its env secrets included (they exist only in memory and in this message). */
  customEngine: CustomEngineSchema.optional(),
  /** The engine session name: `<runId>-<nodeId>-a<n>`. */
  session: z.string(),
});

/** What the working-tree digest covers besides HEAD, the diff and untracked files. */
export const DigestScopeSchema = z.strictObject({
  /** Absolute paths hashed whatever git says of them (the targets of `file` checks, even when ignored). */
  include: z.array(z.string()),
  /** Absolute paths left out (the run store, when it sits inside the repository). */
  exclude: z.array(z.string()),
});
export type DigestScope = z.infer<typeof DigestScopeSchema>;

/** Run a contract's checks and digest the working tree. */
export const VerifyTaskSchema = z.strictObject({
  kind: z.literal('verify'),
  cwd: z.string(),
  checks: z.array(CheckSchema),
  scope: DigestScopeSchema,
});

/** Call a function of a JavaScript module with a context; its JSON return value is the output. */
export const ScriptTaskSchema = z.strictObject({
  kind: z.literal('script'),
  /** Absolute path of the module. */
  module: z.string().min(1),
  export: z.string().min(1),
  input: z.unknown().optional(),
  cwd: z.string(),
  attempt: z.number().int().min(1),
});

/** Digest the working tree only. */
export const DigestTaskSchema = z.strictObject({ kind: z.literal('digest'), cwd: z.string(), scope: DigestScopeSchema });

export const TaskSchema = z.discriminatedUnion('kind', [CommandTaskSchema, AgentTaskSchema, VerifyTaskSchema, ScriptTaskSchema, DigestTaskSchema]);
export type Task = z.infer<typeof TaskSchema>;
export type TaskOf<K extends Task['kind']> = Extract<Task, { kind: K }>;

// ---------------------------------------------------------------- results

/** One check's result inside a verify result. */
export const CheckResultSchema = z.strictObject({
  id: z.string(),
  type: z.enum(['command', 'file']),
  required: z.boolean(),
  passed: z.boolean(),
  durationMs: z.number().min(0),
  detail: z.string(),
  command: z.array(z.string()).optional(),
  exitCode: z.number().int().nullable().optional(),
  timedOut: z.boolean().optional(),
  /** The last lines of the check's output (at most 64 KiB). */
  outputTail: z.string().optional(),
});
export type CheckResult = z.infer<typeof CheckResultSchema>;

export const VerifyDataSchema = z.strictObject({
  passed: z.boolean(),
  results: z.array(CheckResultSchema),
  digest: z.string().nullable(),
  head: z.string().nullable(),
});
export type VerifyData = z.infer<typeof VerifyDataSchema>;

export const ExecutionUsageSchema = z.strictObject({
  cpuMs: z.number().min(0).max(1e12),
  tokensIn: z.number().min(0).max(1e15).default(0),
  tokensOut: z.number().min(0).max(1e15).default(0),
  costUsd: z.number().min(0).max(1e12).default(0),
});
export type ExecutionUsage = z.infer<typeof ExecutionUsageSchema>;

export const ResultSchema = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('ok'),
    output: z.string(),
    /** Bytes the program wrote in all; more than `output` holds when older output was dropped. */
    outputBytes: z.number().int().min(0).optional(),
    usage: ExecutionUsageSchema,
    verify: VerifyDataSchema.optional(),
    digest: z.string().nullable().optional(),
  }),
  z.strictObject({
    type: z.literal('error'),
    code: errorCode,
    message: z.string(),
    output: z.string().optional(),
    outputBytes: z.number().int().min(0).optional(),
    usage: ExecutionUsageSchema.optional(),
    verify: VerifyDataSchema.optional(),
    detail: z.record(z.string(), z.unknown()).optional(),
  }),
]);
export type ExecutionResult = z.infer<typeof ResultSchema>;

// ---------------------------------------------------------------- host -> worker

export const HostMessageSchema = z.discriminatedUnion('type', [
  z.strictObject({
    v,
    type: z.literal('dispatch'),
    executionId,
    fence,
    /** How often the worker heartbeats while executing. */
    heartbeatMs: z.number().int().min(10),
    /** The executables the task may start: `*`, or their resolved real paths (resolved by the host). */
    commands: z.array(z.string()),
    /** Variables added to every program the task starts, but never to the worker itself (NODE_OPTIONS and the like). */
    programEnv: env,
    task: TaskSchema,
  }),
  z.strictObject({ v, type: z.literal('cancel'), executionId, fence, reason: z.enum(['cancelled', 'timeout', 'shutdown']) }),
  z.strictObject({ v, type: z.literal('shutdown') }),
]);
export type HostMessage = z.infer<typeof HostMessageSchema>;

// ---------------------------------------------------------------- worker -> host

export const WorkerMessageSchema = z.discriminatedUnion('type', [
  z.strictObject({ v, type: z.literal('ready'), pid: z.number().int() }),
  z.strictObject({ v, type: z.literal('heartbeat'), executionId, fence }),
  z.strictObject({
    v,
    type: z.literal('progress'),
    executionId,
    fence,
    stream: z.enum(['stdout', 'stderr', 'log']),
    text: z.string().max(65_536),
  }),
  /** Usage reported while executing (a script's reportUsage, an engine's usage events): amounts since the last report. */
  z.strictObject({
    v,
    type: z.literal('usage'),
    executionId,
    fence,
    tokensIn: z.number().min(0).max(1e9),
    tokensOut: z.number().min(0).max(1e9),
    costUsd: z.number().min(0).max(1e6),
    model: z.string().max(200).optional(),
  }),
  z.strictObject({ v, type: z.literal('result'), executionId, fence, result: ResultSchema }),
]);
export type WorkerMessage = z.infer<typeof WorkerMessageSchema>;

/** Marks the messages a runwarden thread posts to its parent port, so the pool knows them from anything a script might post. */
export const THREAD_MESSAGE = '__runwarden';

/** The messages a thread posts about its execution: the worker messages an execution sends, minus `ready` and `result`. */
export type ThreadMessage = Extract<WorkerMessage, { type: 'heartbeat' | 'progress' | 'usage' }>;
