/**
 * The `RunStore` interface: persistence only. It knows runs, events, records,
 * leases, artifacts and the control inbox, and nothing of workers or of the
 * file system — a database-backed store implements the same interface and
 * passes the same conformance tests.
 */
import type { ControlRequest, RunEvent, RunOutcome, RunState } from '../protocol/events.js';

export type { ControlRequest } from '../protocol/events.js';
import type { RunRecord } from '../protocol/record.js';
import type { WorkflowSpec } from '../protocol/spec.js';

/** Who is asking to own runs. `ownerId` is the identity; pid and host only serve liveness checks and messages. */
export interface OwnerInfo {
  /** Unique per host instance (`owner-<uuid>`), never the pid: two hosts in one process differ. */
  ownerId: string;
  pid: number;
  host: string;
  /** The machine's boot id, when known: a lease from an earlier boot is stale. */
  bootId?: string;
  /** The owner process's start time (kernel ticks), when known: defeats pid reuse. */
  pidStart?: string;
}

/**
 * A host's exclusive ownership of a run: a capability checked on every durable
 * write. All four of incarnationId, ownerId, acquisitionId and fence must match
 * the store, else the write is `superseded`.
 */
export interface RunGuard {
  readonly runId: string;
  /** Which creation of this run id (a deleted and re-created id is a new incarnation). */
  readonly incarnationId: string;
  readonly ownerId: string;
  /** Which claim by that owner: re-acquiring mints a new one and kills the old guard. */
  readonly acquisitionId: string;
  /** Monotonic within the incarnation. */
  readonly fence: number;
}

/** A lease as stored: the guard plus what liveness checks and messages need. */
export interface LeaseRecord extends RunGuard {
  pid: number;
  host: string;
  /** `control`: held only for a moment, to apply a control request to a run nobody drives. */
  purpose?: 'control';
  bootId?: string;
  pidStart?: string;
  acquiredAt: string;
  renewedAt: string;
}

/**
 * The result of a write:
 * - `committed`: it landed whole.
 * - `superseded`: the guard is no longer current (taken over or deleted); the owner must stop for good.
 * - `blocked`: contention or a disk fault; nothing was written; the owner may retry later or hand its claim back.
 */
export type CommitStatus = 'committed' | 'superseded' | 'blocked';

/** A blob stored beside the run, by logical key (`nodes/<id>/a<n>/output.txt`, `evidence/<id>/bundle.json`). */
export interface Artifact {
  key: string;
  data: string | Uint8Array;
}

/** What one commit lands: events (with seq and ts set), the record after them, and artifacts. */
export interface CommitBatch {
  events: RunEvent[];
  record: RunRecord;
  artifacts?: Artifact[];
}

export interface CreateRunInput {
  runId: string;
  /** The compiled, secret-free spec. Written once. */
  spec: WorkflowSpec;
  owner: OwnerInfo;
  /** Builds the first events and the record from the incarnation id the store mints. */
  build(incarnationId: string): { events: RunEvent[]; record: RunRecord };
}

export interface LoadedRun {
  spec: WorkflowSpec;
  record: RunRecord;
  lease?: LeaseRecord;
}

export type AcquireResult =
  | { status: 'acquired'; guard: RunGuard; run: LoadedRun }
  | { status: 'held'; lease: LeaseRecord }
  | { status: 'not_found' }
  | { status: 'blocked'; reason: string };

/** One line of `list`. */
export interface RunSummary {
  runId: string;
  name: string;
  state: RunState;
  outcome: RunOutcome;
  createdAt: string;
  updatedAt: string;
  cursor: string | null;
  parentRunId?: string;
  error?: { code: string; message: string };
}

/** A run in a listing: its summary, or why it cannot be read. */
export type ListedRun = RunSummary | { runId: string; unreadable: string };

/** Which runs `list` returns. Filters combine with AND; a run that cannot be read passes only when no state, outcome, name or since filter is given. */
export interface ListOptions {
  /** Include subflow child runs. @default false */
  includeChildren?: boolean;
  /** Only runs in one of these states. */
  state?: readonly RunState[];
  /** Only runs with one of these outcomes. */
  outcome?: readonly RunOutcome[];
  /** Only runs of the spec with this name. */
  name?: string;
  /** Only runs updated at or after this ISO-8601 instant. */
  since?: string;
  /** Continue after this cursor (`cursorOf` the last run of the previous page); the order is newest first, then by run id. */
  after?: string;
  /** At most this many runs. */
  limit?: number;
}

export interface RunStore {
  /**
   * Create a run and claim it in one atomic step: the run exists whole (spec,
   * first events, record, lease) or not at all.
   * @throws {RunwardenError} `RUN_EXISTS` when the id is taken, `RUN_ID_INVALID` for a bad id.
   */
  create(input: CreateRunInput): Promise<{ guard: RunGuard; record: RunRecord }>;
  /**
   * Read a run, finishing any published-but-unapplied batch first and rebuilding
   * a lost or torn record from the events. Undefined when the run does not exist.
   * @throws {RunwardenError} `STORE_CORRUPT` when neither the record nor the events can be read.
   */
  load(runId: string): Promise<LoadedRun | undefined>;
  /** Take the run's lease unless another live owner holds it. Re-acquiring by the same owner kills its old guard. */
  acquire(runId: string, owner: OwnerInfo, options?: { purpose?: 'control' }): Promise<AcquireResult>;
  /** Land a batch whole, or nothing. The only way to change a run's state. */
  commit(guard: RunGuard, batch: CommitBatch): Promise<CommitStatus>;
  /** Refresh the lease's heartbeat. */
  renew(guard: RunGuard): Promise<CommitStatus>;
  /** Give the lease up; the incarnation and its fence counter stay. */
  release(guard: RunGuard): Promise<CommitStatus>;
  /** Remove the run under its guard; its id may then be reused as a new incarnation. */
  delete(guard: RunGuard): Promise<CommitStatus>;
  /** Whether a lease's holder is alive (same machine: its process; elsewhere: its heartbeat). */
  isLeaseLive(lease: LeaseRecord): boolean;
  /**
   * Whether `guard` is still the run's current lease, read without the lock.
   * An owner checks this between commits so it learns of a takeover before its next write.
   */
  isCurrent(guard: RunGuard): Promise<boolean>;
  /** Runs matching `options`, newest first; a run that cannot be read is listed with the reason. */
  list(options?: ListOptions): Promise<ListedRun[]>;
  /** Events with seq > `afterSeq`, in order. A torn last line is not returned. */
  readEvents(runId: string, afterSeq?: number): Promise<RunEvent[]>;
  readArtifact(runId: string, key: string): Promise<Buffer | undefined>;
  /** Where a user can find a run or one of its artifacts (a path, a URL), if the store has such a notion. */
  locate(runId: string, key?: string): string | undefined;
  /** Queue a control request for the run's owner. Durable once this resolves. */
  postControl(runId: string, request: ControlRequest): Promise<void>;
  /** Control requests not yet removed, oldest first. */
  pendingControls(runId: string): Promise<ControlRequest[]>;
  /** Remove applied control requests. */
  removeControls(runId: string, ids: readonly string[]): Promise<void>;
}
