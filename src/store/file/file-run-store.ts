/**
 * The default embedded store: one directory per run under `<home>/runs/<runId>/`.
 *
 * ```
 * spec.json         the compiled, secret-free spec; written once
 * run.json          checkpoint {eventsBytes, record}, replaced atomically
 * events.jsonl      append-only; the durable truth
 * incarnation.json  {incarnationId, nextFence}; survives lease release, dies with the run
 * lease.json        the current owner, or absent
 * lease.lock/       the critical section (proper-lockfile)
 * .tx/              a published batch awaiting application
 * inbox/            control requests waiting for the owner
 * nodes/<id>/…      node artifacts (outputs)
 * evidence/<id>/…   evidence bundles
 * ```
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdir, readdir, rename, rm, stat, unlink } from 'node:fs/promises';
import { join, normalize, sep } from 'node:path';
import { LeaseHeldError, RunwardenError } from '../../protocol/errors.js';
import { ControlRequestSchema, TERMINAL_STATES, type RunEvent } from '../../protocol/events.js';
import { assertRunId, runIdProblem } from '../../protocol/ids.js';
import { applyEvents, replay, type RunRecord } from '../../protocol/record.js';
import { parseWorkflowSpec, type WorkflowSpec } from '../../protocol/spec.js';
import { failpoint } from '../../util/failpoints.js';
import { DEFAULT_LEASE_TTL_MS, leaseIsLive } from '../liveness.js';
import type {
  AcquireResult,
  CommitBatch,
  CommitStatus,
  ControlRequest,
  CreateRunInput,
  LeaseRecord,
  ListedRun,
  ListOptions,
  LoadedRun,
  OwnerInfo,
  RunGuard,
  RunStore,
  RunSummary,
} from '../run-store.js';
import { selectRuns } from '../run-query.js';
import { eventLines, parseEventLines, readEventLines, repairTornTail } from './events-log.js';
import { ensureDir, fsyncDir, isErrno, readIfExists, readJsonLoose, removeTree, writeFileAtomic, writeFileDurable } from './fsx.js';
import { RunIndex, stampOf, type IndexedSummary } from './run-index.js';
import { LockBusyError, RunGoneError, withRunLock } from './run-lock.js';
import { applyPending, hasPendingTx, pendingRecord, stageAndPublish, type Checkpoint } from './tx.js';

/** Receives the store's warnings (a failed apply, a compromised lock). */
export interface StoreLogger {
  warn(obj: object, msg: string): void;
}

export interface FileRunStoreOptions {
  /** The store root (`$RUNWARDEN_HOME`). Runs live in `<home>/runs`. */
  home: string;
  /** Heartbeat age after which a lease held from another machine is stale. @default 60000 */
  leaseTtlMs?: number;
  /** How long to wait for a contended run lock before reporting `blocked`. @default 4000 */
  lockWaitMs?: number;
  logger?: StoreLogger;
}

interface Incarnation {
  incarnationId: string;
  nextFence: number;
}

const silent: StoreLogger = { warn: () => undefined };

/** The file-system {@link RunStore}. Safe for many processes on one machine sharing `home`. */
export class FileRunStore implements RunStore {
  readonly home: string;
  readonly runsDir: string;
  readonly #leaseTtlMs: number;
  readonly #lockWaitMs: number;
  readonly #log: StoreLogger;
  readonly #specs = new Map<string, { incarnationId: string; spec: WorkflowSpec }>();
  readonly #index: RunIndex;

  constructor(options: FileRunStoreOptions) {
    this.home = options.home;
    this.#index = new RunIndex(options.home);
    this.runsDir = join(options.home, 'runs');
    this.#leaseTtlMs = options.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS;
    this.#lockWaitMs = options.lockWaitMs ?? 4000;
    this.#log = options.logger ?? silent;
  }

  #dir(runId: string): string {
    assertRunId(runId);
    return join(this.runsDir, runId);
  }

  async #lock<T>(dir: string, fn: () => Promise<T>): Promise<T> {
    // Fail fast on a missing run: proper-lockfile would retry ENOENT for the whole wait budget.
    try {
      await stat(dir);
    } catch (err) {
      if (isErrno(err, 'ENOENT', 'ENOTDIR')) throw new RunGoneError(dir);
      throw err;
    }
    return withRunLock(dir, { waitMs: this.#lockWaitMs, onCompromised: (err) => this.#log.warn({ dir, err: err.message }, 'run lock compromised') }, fn);
  }

  // ------------------------------------------------------------ create

  async create(input: CreateRunInput): Promise<{ guard: RunGuard; record: RunRecord }> {
    const dir = this.#dir(input.runId);
    const incarnationId = randomUUID();
    const { events, record } = input.build(incarnationId);
    const now = new Date().toISOString();
    const lease: LeaseRecord = { ...guardFields(input.runId, incarnationId, input.owner, 1), ...ownerFields(input.owner), acquiredAt: now, renewedAt: now };
    const creatingRoot = join(this.runsDir, '.creating');
    const creating = join(creatingRoot, `${input.runId}-${randomBytes(6).toString('hex')}`);
    try {
      await mkdir(creating, { recursive: true });
      const eventsText = eventLines(events);
      const checkpoint: Checkpoint = { v: 1, eventsBytes: Buffer.byteLength(eventsText), record };
      await writeFileDurable(join(creating, 'spec.json'), JSON.stringify(input.spec, null, 2));
      await writeFileDurable(join(creating, 'incarnation.json'), JSON.stringify({ incarnationId, nextFence: 2 } satisfies Incarnation));
      await writeFileDurable(join(creating, 'lease.json'), JSON.stringify(lease));
      await writeFileDurable(join(creating, 'events.jsonl'), eventsText);
      await writeFileDurable(join(creating, 'run.json'), JSON.stringify(checkpoint));
      await fsyncDir(creating);
      // The claim: renaming a complete directory into place. It fails for all but the first creator
      // (the target exists and is not empty), and no reader ever sees a half-created run.
      try {
        await rename(creating, dir);
      } catch (err) {
        if (isErrno(err, 'EEXIST', 'ENOTEMPTY', 'EISDIR', 'ENOTDIR')) {
          throw new RunwardenError('RUN_EXISTS', `run ${input.runId} already exists; choose another id or delete it first`, { field: 'runId' });
        }
        throw err;
      }
      await fsyncDir(this.runsDir);
    } catch (err) {
      throw storeFault(err, `cannot create run ${input.runId}`);
    } finally {
      // `.creating/` itself stays: removing it when empty would race other creators' mkdir into it.
      await rm(creating, { recursive: true, force: true }).catch(() => undefined);
    }
    this.#specs.set(input.runId, { incarnationId, spec: input.spec });
    await this.#indexRun(dir, record);
    return { guard: pickGuard(lease), record };
  }

  // ------------------------------------------------------------ read

  async load(runId: string): Promise<LoadedRun | undefined> {
    const dir = this.#dir(runId);
    const incarnation = await readJsonLoose<Incarnation>(join(dir, 'incarnation.json'));
    if (incarnation === undefined) {
      if (await exists(dir)) throw corrupt(runId, 'incarnation.json is missing or unreadable');
      return undefined;
    }
    const spec = await this.#spec(runId, dir, incarnation.incarnationId);
    let record: RunRecord | undefined;
    if (await hasPendingTx(dir)) {
      try {
        await this.#lock(dir, () => applyPending(dir));
      } catch (err) {
        if (err instanceof RunGoneError) return undefined;
        // The writer is busy, or the directory cannot be written: a published batch is
        // authoritative before it is applied, so read it without applying it.
        record = await pendingRecord(dir);
        if (record === undefined) throw storeFault(err, `cannot read run ${runId}`);
      }
    }
    record ??= await this.#readRecord(runId, dir, spec);
    const lease = await readJsonLoose<LeaseRecord>(join(dir, 'lease.json'));
    return lease === undefined ? { spec, record } : { spec, record, lease };
  }

  async #spec(runId: string, dir: string, incarnationId: string): Promise<WorkflowSpec> {
    const cached = this.#specs.get(runId);
    if (cached?.incarnationId === incarnationId) return cached.spec;
    const raw = await readIfExists(join(dir, 'spec.json'));
    if (raw === undefined) throw corrupt(runId, 'spec.json is missing');
    let spec: WorkflowSpec;
    try {
      spec = parseWorkflowSpec(JSON.parse(raw.toString('utf8')), `spec.json of run ${runId}`);
    } catch (err) {
      throw corrupt(runId, `spec.json cannot be read: ${(err as Error).message}`);
    }
    this.#specs.set(runId, { incarnationId, spec });
    return spec;
  }

  /** The checkpoint plus any events after it; the full replay when the checkpoint is missing, torn or ahead of the log. */
  async #readRecord(runId: string, dir: string, spec: WorkflowSpec): Promise<RunRecord> {
    const eventsPath = join(dir, 'events.jsonl');
    const checkpoint = await readJsonLoose<Checkpoint>(join(dir, 'run.json'));
    if (checkpoint?.v === 1 && typeof checkpoint.eventsBytes === 'number' && checkpoint.record?.runId === runId) {
      const tail = await readEventLines(eventsPath, checkpoint.eventsBytes);
      if (tail !== undefined && tail.fileBytes >= checkpoint.eventsBytes) {
        try {
          const events = parseEventLines(tail.lines.filter((l) => l !== ''));
          return events.length === 0 ? checkpoint.record : applyEvents(checkpoint.record, events);
        } catch {
          // fall through to a full replay
        }
      }
    }
    const all = await readEventLines(eventsPath, 0);
    if (all === undefined || all.lines.length === 0) throw corrupt(runId, 'run.json is unusable and events.jsonl is empty or missing');
    try {
      return replay(spec, parseEventLines(all.lines));
    } catch (err) {
      throw corrupt(runId, `cannot rebuild the run from events.jsonl: ${(err as Error).message}`);
    }
  }

  async readEvents(runId: string, afterSeq = 0): Promise<RunEvent[]> {
    const read = await readEventLines(join(this.#dir(runId), 'events.jsonl'), 0);
    if (read === undefined) throw notFound(runId);
    const lines = read.lines.filter((l) => l !== '');
    return parseEventLines(lines).filter((e) => e.seq > afterSeq);
  }

  async readArtifact(runId: string, key: string): Promise<Buffer | undefined> {
    return readIfExists(this.#artifactPath(runId, key));
  }

  locate(runId: string, key?: string): string {
    return key === undefined ? this.#dir(runId) : this.#artifactPath(runId, key);
  }

  #artifactPath(runId: string, key: string): string {
    const rel = normalize(key);
    if (rel.startsWith('..') || rel.startsWith(sep) || rel.split(sep).includes('..')) throw new RunwardenError('OPTION_INVALID', `artifact key escapes the run: ${key}`, { field: 'key' });
    return join(this.#dir(runId), rel);
  }

  /**
   * Runs matching `options`, newest first. Reads the run index and one `stat`
   * per run; only runs whose `run.json` moved since their index line (or that
   * have none) are read, and their fresh lines are appended.
   */
  async list(options: ListOptions = {}): Promise<ListedRun[]> {
    let names: string[];
    try {
      names = await readdir(this.runsDir);
    } catch (err) {
      if (isErrno(err, 'ENOENT')) return [];
      throw storeFault(err, 'cannot list runs');
    }
    names = names.filter((n) => !n.startsWith('.') && runIdProblem(n) === undefined);
    const index = await this.#index.read().catch(() => ({ runs: new Map<string, IndexedSummary>(), lines: 0, bytes: 0 }));
    const fresh: IndexedSummary[] = [];
    const listed: ListedRun[] = [];
    const live = new Map<string, IndexedSummary>();
    await forEachLimit(names, 32, async (runId) => {
      const dir = join(this.runsDir, runId);
      const known = index.runs.get(runId);
      try {
        const st = await stat(join(dir, 'run.json')).catch((err: unknown) => {
          if (isErrno(err, 'ENOENT', 'ENOTDIR')) return undefined;
          throw err;
        });
        const stamp = st === undefined ? '' : stampOf(st);
        let summary: IndexedSummary | undefined = known;
        // A published batch not yet applied outranks run.json: only a run that can still change has one.
        const current = known !== undefined && known.stamp === stamp && (TERMINAL_STATES.has(known.state) || !(await hasPendingTx(dir)));
        if (!current) {
          const record = await this.#summaryRecord(runId);
          if (record === undefined) return; // deleted meanwhile
          summary = { ...summarize(record), stamp };
          fresh.push(summary);
        }
        if (summary === undefined) return;
        live.set(runId, summary);
        const { stamp: _stamp, ...plain } = summary;
        listed.push(plain);
      } catch (err) {
        // A run that cannot be read is listed as such, never silently left out.
        listed.push({ runId, unreadable: (err as Error).message });
      }
    });
    // A compaction writes every live line, fresh ones included; otherwise append the fresh ones.
    if (!(await this.#index.maybeCompact(live, index.lines, index.bytes))) await this.#index.putMany(fresh);
    return selectRuns(listed, options);
  }

  async #summaryRecord(runId: string): Promise<RunRecord | undefined> {
    const dir = join(this.runsDir, runId);
    const checkpoint = await readJsonLoose<Checkpoint>(join(dir, 'run.json'));
    if (checkpoint?.record?.runId === runId && !(await hasPendingTx(dir))) return checkpoint.record;
    return (await this.load(runId))?.record;
  }

  /** Append a run's summary to the index, stamped with the `run.json` it now has. Never throws. */
  async #indexRun(dir: string, record: RunRecord): Promise<void> {
    try {
      const st = await stat(join(dir, 'run.json'));
      await this.#index.put({ ...summarize(record), stamp: stampOf(st) });
    } catch {
      // the index is a cache; the next list re-reads this run
    }
  }

  // ------------------------------------------------------------ leases

  isLeaseLive(lease: LeaseRecord): boolean {
    return leaseIsLive(lease, { ttlMs: this.#leaseTtlMs });
  }

  async acquire(runId: string, owner: OwnerInfo, options: { purpose?: 'control' } = {}): Promise<AcquireResult> {
    const dir = this.#dir(runId);
    let outcome: { guard: RunGuard } | { held: LeaseRecord };
    try {
      outcome = await this.#lock(dir, async () => {
        await this.#recoverLocked(dir);
        await repairTornTail(join(dir, 'events.jsonl'));
        const incarnation = await readJsonLoose<Incarnation>(join(dir, 'incarnation.json'));
        if (incarnation === undefined) throw corrupt(runId, 'incarnation.json is missing or unreadable');
        const current = await readJsonLoose<LeaseRecord>(join(dir, 'lease.json'));
        if (current !== undefined && current.incarnationId === incarnation.incarnationId && current.ownerId !== owner.ownerId && this.isLeaseLive(current)) {
          return { held: current };
        }
        failpoint('lease.acquire');
        const fence = incarnation.nextFence;
        await writeFileAtomic(join(dir, 'incarnation.json'), JSON.stringify({ ...incarnation, nextFence: fence + 1 }), { durable: true });
        const now = new Date().toISOString();
        const lease: LeaseRecord = { ...guardFields(runId, incarnation.incarnationId, owner, fence), ...ownerFields(owner), acquiredAt: now, renewedAt: now };
        if (options.purpose === 'control') lease.purpose = 'control';
        await writeFileAtomic(join(dir, 'lease.json'), JSON.stringify(lease), { durable: true });
        return { guard: pickGuard(lease) };
      });
    } catch (err) {
      if (err instanceof RunGoneError) return { status: 'not_found' };
      if (err instanceof LockBusyError) return { status: 'blocked', reason: err.message };
      const fault = storeFault(err, `cannot take run ${runId}`);
      if (fault instanceof RunwardenError && fault.code === 'STORE_BLOCKED') return { status: 'blocked', reason: fault.message };
      throw fault;
    }
    if ('held' in outcome) return { status: 'held', lease: outcome.held };
    const run = await this.load(runId);
    if (run === undefined) return { status: 'not_found' };
    return { status: 'acquired', guard: outcome.guard, run };
  }

  async #recoverLocked(dir: string): Promise<void> {
    await applyPending(dir);
    await rm(join(dir, '.tx.staging'), { recursive: true, force: true });
    for (const name of await readdir(dir)) {
      if (name.startsWith('.rm-')) await rm(join(dir, name), { recursive: true, force: true });
    }
  }

  async isCurrent(guard: RunGuard): Promise<boolean> {
    return this.#guardIsCurrent(this.#dir(guard.runId), guard);
  }

  async #guardIsCurrent(dir: string, guard: RunGuard): Promise<boolean> {
    const lease = await readJsonLoose<LeaseRecord>(join(dir, 'lease.json'));
    return (
      lease !== undefined &&
      lease.incarnationId === guard.incarnationId &&
      lease.ownerId === guard.ownerId &&
      lease.acquisitionId === guard.acquisitionId &&
      lease.fence === guard.fence
    );
  }

  /** Run `fn` under the lock after finishing any pending batch and checking the guard. */
  async #guarded(guard: RunGuard, what: string, fn: (dir: string) => Promise<void>): Promise<CommitStatus> {
    const dir = this.#dir(guard.runId);
    try {
      return await this.#lock(dir, async () => {
        if (await hasPendingTx(dir)) await applyPending(dir);
        if (!(await this.#guardIsCurrent(dir, guard))) return 'superseded';
        await fn(dir);
        return 'committed';
      });
    } catch (err) {
      if (err instanceof RunGoneError) return 'superseded';
      if (err instanceof LockBusyError) return 'blocked';
      this.#log.warn({ runId: guard.runId, what, err: (err as Error).message }, 'store write blocked');
      return 'blocked';
    }
  }

  async commit(guard: RunGuard, batch: CommitBatch): Promise<CommitStatus> {
    let published = false;
    const status = await this.#guarded(guard, 'commit', async (dir) => {
      await stageAndPublish(dir, batch, () => {
        published = true;
      });
      failpoint('commit.after-publish');
      try {
        await applyPending(dir);
      } catch (err) {
        // Committed all the same: the next lock holder finishes the batch.
        this.#log.warn({ runId: guard.runId, err: (err as Error).message }, 'commit published but not yet applied');
        return;
      }
      await this.#indexRun(dir, batch.record);
    });
    return status === 'blocked' && published ? 'committed' : status;
  }

  async renew(guard: RunGuard): Promise<CommitStatus> {
    return this.#guarded(guard, 'renew', async (dir) => {
      failpoint('lease.renew');
      const lease = await readJsonLoose<LeaseRecord>(join(dir, 'lease.json'));
      await writeFileAtomic(join(dir, 'lease.json'), JSON.stringify({ ...lease, renewedAt: new Date().toISOString() }), { durable: true });
    });
  }

  async release(guard: RunGuard): Promise<CommitStatus> {
    return this.#guarded(guard, 'release', async (dir) => {
      failpoint('lease.release');
      await unlink(join(dir, 'lease.json'));
      await fsyncDir(dir);
    });
  }

  async delete(guard: RunGuard): Promise<CommitStatus> {
    const trash = join(this.runsDir, '.trash');
    try {
      await ensureDir(trash);
    } catch {
      return 'blocked';
    }
    const aside = join(trash, `${guard.runId}-${randomBytes(6).toString('hex')}`);
    const status = await this.#guarded(guard, 'delete', async (dir) => {
      await rename(dir, aside);
      await fsyncDir(this.runsDir);
    });
    if (status === 'committed') {
      this.#specs.delete(guard.runId);
      await this.#index.remove(guard.runId);
      await removeTree(aside);
    }
    return status;
  }

  // ------------------------------------------------------------ control inbox

  async postControl(runId: string, request: ControlRequest): Promise<void> {
    const dir = this.#dir(runId);
    if (!(await exists(join(dir, 'incarnation.json')))) throw notFound(runId);
    const inbox = join(dir, 'inbox');
    try {
      await ensureDir(inbox);
      await writeFileAtomic(join(inbox, `${Date.now().toString().padStart(15, '0')}-${request.id}.json`), JSON.stringify(request), { durable: true });
    } catch (err) {
      throw storeFault(err, `cannot queue a ${request.action} request for run ${runId}`);
    }
  }

  async pendingControls(runId: string): Promise<ControlRequest[]> {
    const inbox = join(this.#dir(runId), 'inbox');
    let names: string[];
    try {
      names = await readdir(inbox);
    } catch (err) {
      if (isErrno(err, 'ENOENT', 'ENOTDIR')) return [];
      throw storeFault(err, `cannot read the inbox of run ${runId}`);
    }
    const requests: ControlRequest[] = [];
    for (const name of names.filter((n) => n.endsWith('.json')).sort()) {
      const parsed = ControlRequestSchema.safeParse(await readJsonLoose<unknown>(join(inbox, name)));
      if (parsed.success) requests.push(parsed.data);
      else {
        // Not a request any runwarden wrote: drop it rather than let it block the inbox.
        this.#log.warn({ runId, file: name, problem: parsed.error.issues[0]?.message }, 'invalid control request dropped');
        await unlink(join(inbox, name)).catch(() => undefined);
      }
    }
    return requests;
  }

  async removeControls(runId: string, ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    const inbox = join(this.#dir(runId), 'inbox');
    const wanted = new Set(ids);
    let names: string[];
    try {
      names = await readdir(inbox);
    } catch (err) {
      if (isErrno(err, 'ENOENT')) return;
      throw err;
    }
    for (const name of names) {
      const id = /^\d+-(.+)\.json$/.exec(name)?.[1];
      if (id !== undefined && wanted.has(id)) await unlink(join(inbox, name)).catch(() => undefined);
    }
  }
}

function guardFields(runId: string, incarnationId: string, owner: OwnerInfo, fence: number): RunGuard {
  return { runId, incarnationId, ownerId: owner.ownerId, acquisitionId: randomUUID(), fence };
}

function ownerFields(owner: OwnerInfo): Pick<LeaseRecord, 'pid' | 'host' | 'bootId' | 'pidStart'> {
  const fields: Pick<LeaseRecord, 'pid' | 'host' | 'bootId' | 'pidStart'> = { pid: owner.pid, host: owner.host };
  if (owner.bootId !== undefined) fields.bootId = owner.bootId;
  if (owner.pidStart !== undefined) fields.pidStart = owner.pidStart;
  return fields;
}

function pickGuard(lease: LeaseRecord): RunGuard {
  return { runId: lease.runId, incarnationId: lease.incarnationId, ownerId: lease.ownerId, acquisitionId: lease.acquisitionId, fence: lease.fence };
}

function summarize(record: RunRecord): RunSummary {
  const summary: RunSummary = {
    runId: record.runId,
    name: record.name,
    state: record.state,
    outcome: record.outcome,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    cursor: record.cursor,
  };
  if (record.parentRunId !== undefined) summary.parentRunId = record.parentRunId;
  if (record.error !== undefined) summary.error = { code: record.error.code, message: record.error.message };
  return summary;
}

/** Run `fn` over `items`, at most `limit` at a time. */
async function forEachLimit<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < items.length) await fn(items[next++] as T);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch (err) {
    if (isErrno(err, 'ENOENT', 'ENOTDIR')) return false;
    throw err;
  }
}

/** errno codes that mean the store cannot be written (or read) right now, rather than a bug. */
const FAULTS = ['EACCES', 'EPERM', 'EROFS', 'ENOSPC', 'EDQUOT', 'EIO', 'EBUSY', 'EMFILE', 'ENFILE'];

/** A file-system fault as `STORE_BLOCKED`, naming what failed; anything else unchanged. */
function storeFault(err: unknown, what: string): unknown {
  if (err instanceof RunwardenError || !isErrno(err, ...FAULTS)) return err;
  const e = err as NodeJS.ErrnoException;
  return new RunwardenError('STORE_BLOCKED', `${what}: ${e.code}${e.path === undefined ? '' : ` on ${e.path}`}`, { cause: err });
}

function notFound(runId: string): RunwardenError {
  return new RunwardenError('RUN_NOT_FOUND', `no run with id ${runId}`, { field: 'runId' });
}

function corrupt(runId: string, detail: string): RunwardenError {
  return new RunwardenError('STORE_CORRUPT', `run ${runId}: ${detail}`);
}

/** Throw {@link LeaseHeldError} for a refused acquisition. */
export function leaseHeld(runId: string, lease: LeaseRecord): LeaseHeldError {
  return new LeaseHeldError(runId, { ownerId: lease.ownerId, pid: lease.pid, host: lease.host, renewedAt: lease.renewedAt });
}
