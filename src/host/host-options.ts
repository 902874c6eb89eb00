/**
 * Host options: one pipeline. User options (programmatic, or `config.json` in
 * the store home) → defaults → {@link compileHostOptions}, which validates
 * everything and returns a frozen object. Nothing else validates options.
 */
import { readFileSync } from 'node:fs';
import { availableParallelism, homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { ValidationError } from '../protocol/errors.js';
import { BudgetSchema } from '../protocol/budget.js';
import { PolicySchema, absolutePolicy } from '../protocol/policy.js';
import { zodIssues } from '../protocol/spec.js';
import { DeliveryOptionsSchema, type DeliveryOptions } from './delivery/config.js';

const ms = (min: number, max = 7 * 24 * 3_600_000) => z.number().int('must be an integer number of milliseconds').min(min).max(max);

/** The options a host accepts, in `config.json` or programmatically. Every field is optional. */
export const HostOptionsSchema = z.strictObject({
  /** The store root. @default $RUNWARDEN_HOME, else ~/.runwarden */
  home: z.string().min(1).optional(),
  /** Executions running at once across all runs. @default CPU count × 2 */
  maxConcurrent: z.number().int().min(1).max(10_000).optional(),
  /** Executions of one run at once (fan-out members). @default maxConcurrent */
  maxConcurrentPerRun: z.number().int().min(1).max(10_000).optional(),
  /** How often a worker heartbeats while executing. @default 1000 */
  heartbeatMs: ms(10, 60_000).optional(),
  /** A worker silent for this long is lost: killed, and its claim re-queued. @default 10000 */
  heartbeatTimeoutMs: ms(50).optional(),
  /** Time between SIGTERM and SIGKILL when an execution is stopped. @default 5000 */
  killGraceMs: ms(0, 600_000).optional(),
  /** Re-queues of a node after lost workers or hosts, per visit, unless the node sets its own. @default 3 */
  maxRequeues: z.number().int().min(0).max(100).optional(),
  /** `timeoutMs` of a node that sets none: 30 minutes. @default 1800000 */
  defaultTimeoutMs: ms(1).optional(),
  /** A lease held from another machine is stale after this long without a heartbeat. @default 60000 */
  leaseTtlMs: ms(1000).optional(),
  /** How often held leases are renewed. @default 15000 */
  leaseRenewMs: ms(100).optional(),
  /** How often an owner looks for control requests (cancel, steer, approve) from other processes. @default 250 */
  controlPollMs: ms(10, 60_000).optional(),
  /** An idle worker process exits after this long. @default 10000 */
  workerIdleMs: ms(0).optional(),
  /** A worker that has not said `ready` after this long failed to start. @default 10000 */
  workerStartTimeoutMs: ms(100).optional(),
  /**
   * How long a run keeps retrying a write the store refused (a full or read-only disk, lock contention)
   * before it stops with STORE_BLOCKED, resumable once the fault clears. @default 10000
   */
  storeRetryMs: ms(0, 3_600_000).optional(),
  /** How deep subflows may nest. @default 8 */
  subflowMaxDepth: z.number().int().min(1).max(64).optional(),
  /** The policy ceiling: the most any spec may allow its executions. @default everything (specs narrow from there) */
  policy: PolicySchema.optional(),
  /** Default limits of every execution (a spec's `executionBudget` and a node's `budget` override them). @default none */
  executionBudget: BudgetSchema.optional(),
  /** Worker threads at once, for `script` nodes in thread isolation. @default CPU count */
  maxThreads: z.number().int().min(1).max(1024).optional(),
  /** How often a busy worker process's tree is sampled for CPU and memory. @default 500 */
  sampleMs: ms(10, 60_000).optional(),
  /** Idle worker processes kept ready per worker key once the key has been used. @default 0 */
  minWarm: z.number().int().min(0).max(64).optional(),
  /** Executions a worker process runs before it is replaced. @default 100 */
  recycleAfter: z.number().int().min(1).max(1_000_000).optional(),
  /** pino level of the host log. @default 'info' */
  logLevel: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).optional(),
  /** Where run events are delivered (webhook, command, file) and how obligations are retried. @default no sinks */
  delivery: DeliveryOptionsSchema.optional(),
  /** The daemon's TCP port on 127.0.0.1 (0: any free port). @default 7411 */
  port: z.number().int().min(0).max(65_535).optional(),
  /** How often the daemon looks for runs nobody drives (a dead owner, a released lease) and adopts them. @default 5000 */
  adoptScanMs: ms(50, 3_600_000).optional(),
});

/** Host options as given (defaults not yet applied). */
export type HostOptions = z.input<typeof HostOptionsSchema>;

/** Compiled, validated, frozen host options. */
export type CompiledHostOptions = Readonly<Required<Omit<HostOptions, 'delivery'>> & { delivery: DeliveryOptions }>;

/** The store home: the option, else `$RUNWARDEN_HOME`, else `~/.runwarden`. */
export function resolveHome(home?: string): string {
  return resolve(home ?? process.env.RUNWARDEN_HOME ?? join(homedir(), '.runwarden'));
}

/**
 * Read `config.json` from the store home, if present.
 * @throws {ValidationError} `CONFIG_INVALID` naming the file and field.
 */
export function readHostConfig(home: string): HostOptions {
  const path = join(home, 'config.json');
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return {};
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ValidationError('CONFIG_INVALID', path, [{ path: '', message: `not valid JSON: ${(err as Error).message}` }]);
  }
  const parsed = HostOptionsSchema.safeParse(json);
  if (!parsed.success) throw new ValidationError('CONFIG_INVALID', path, zodIssues(parsed.error));
  return parsed.data;
}

/**
 * Validate options, merge them over `config.json` and the defaults, and freeze the result.
 * @throws {ValidationError} `CONFIG_INVALID` naming the field.
 */
export function compileHostOptions(options: HostOptions = {}): CompiledHostOptions {
  const parsed = HostOptionsSchema.safeParse(options);
  if (!parsed.success) throw new ValidationError('CONFIG_INVALID', 'host options', zodIssues(parsed.error));
  const home = resolveHome(parsed.data.home);
  const fromFile = readHostConfig(home);
  const given = stripUndefined(parsed.data);
  const merged = { ...fromFile, ...given };
  /** Where a value came from, for errors: the config file or the options. */
  const source = (field: keyof HostOptions): string => (field in given ? 'host options' : join(home, 'config.json'));
  const heartbeatMs = merged.heartbeatMs ?? 1000;
  const delivery = DeliveryOptionsSchema.safeParse(merged.delivery ?? {});
  if (!delivery.success) throw new ValidationError('CONFIG_INVALID', source('delivery'), zodIssues(delivery.error, 'delivery'));
  const compiled: CompiledHostOptions = {
    home,
    maxConcurrent: merged.maxConcurrent ?? availableParallelism() * 2,
    maxConcurrentPerRun: merged.maxConcurrentPerRun ?? merged.maxConcurrent ?? availableParallelism() * 2,
    heartbeatMs,
    heartbeatTimeoutMs: merged.heartbeatTimeoutMs ?? Math.max(10_000, heartbeatMs * 3),
    killGraceMs: merged.killGraceMs ?? 5000,
    maxRequeues: merged.maxRequeues ?? 3,
    defaultTimeoutMs: merged.defaultTimeoutMs ?? 1_800_000,
    leaseTtlMs: merged.leaseTtlMs ?? 60_000,
    leaseRenewMs: merged.leaseRenewMs ?? 15_000,
    controlPollMs: merged.controlPollMs ?? 250,
    workerIdleMs: merged.workerIdleMs ?? 10_000,
    workerStartTimeoutMs: merged.workerStartTimeoutMs ?? 10_000,
    storeRetryMs: merged.storeRetryMs ?? 10_000,
    subflowMaxDepth: merged.subflowMaxDepth ?? 8,
    // Relative ceiling paths mean the same from wherever a command runs: they resolve against the store home.
    policy: absolutePolicy(merged.policy ?? {}, home),
    executionBudget: merged.executionBudget ?? {},
    maxThreads: merged.maxThreads ?? availableParallelism(),
    sampleMs: merged.sampleMs ?? 500,
    minWarm: merged.minWarm ?? 0,
    recycleAfter: merged.recycleAfter ?? 100,
    logLevel: merged.logLevel ?? ((process.env.RUNWARDEN_LOG_LEVEL as HostOptions['logLevel']) || 'info'),
    delivery: delivery.data,
    port: merged.port ?? 7411,
    adoptScanMs: merged.adoptScanMs ?? 5000,
  };
  if (compiled.heartbeatTimeoutMs <= compiled.heartbeatMs) {
    throw new ValidationError('CONFIG_INVALID', source('heartbeatTimeoutMs'), [
      { path: 'heartbeatTimeoutMs', message: `must be greater than heartbeatMs (${compiled.heartbeatMs}); received ${compiled.heartbeatTimeoutMs}` },
    ]);
  }
  if (compiled.leaseRenewMs >= compiled.leaseTtlMs) {
    throw new ValidationError('CONFIG_INVALID', source('leaseRenewMs'), [
      { path: 'leaseRenewMs', message: `must be less than leaseTtlMs (${compiled.leaseTtlMs}), or leases go stale between renewals; received ${compiled.leaseRenewMs}` },
    ]);
  }
  return Object.freeze(compiled);
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
