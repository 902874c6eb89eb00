/**
 * The host: owns the store, the leases, the worker pool and the runs it
 * drives. A thin facade over the kernel; the CLI and the library API both go
 * through it.
 */
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { z } from 'zod';
import { LeaseHeldError, RunwardenError, ValidationError, isRunwardenError } from '../protocol/errors.js';
import { zodIssues } from '../protocol/validation.js';
import { TERMINAL_STATES, type RunEvent, type SecretRef } from '../protocol/events.js';
import { assertRunId, newRunId } from '../protocol/ids.js';
import { createRecord, type RunRecord } from '../protocol/record.js';
import type { WorkflowSpec } from '../protocol/spec.js';
import { FileRunStore, leaseHeld } from '../store/file/file-run-store.js';
import { currentOwner } from '../store/liveness.js';
import type { ControlRequest, ListedRun, ListOptions, LoadedRun, OwnerInfo, RunGuard, RunStore } from '../store/run-store.js';
import { compileHostOptions, type CompiledHostOptions, type HostOptions } from './host-options.js';
import { LeaseKeeper } from './lease-keeper.js';
import { createHostLogger, silentLogger } from './logger.js';
import { RunDriver, type ChildRunRequest, type ChildRunResult, type DriveResult, type DriverListeners, type KernelDeps } from './kernel/run-driver.js';
import type { Pool, PoolStats } from './pool/execution.js';
import { ProcessPool } from './pool/process-pool.js';
import { ThreadPool } from './pool/thread-pool.js';
import { compileCeiling } from './policy.js';
import type { EffectivePolicy } from '../protocol/policy.js';
import { Scheduler } from './scheduler.js';
import type { EvidenceBundle } from './kernel/evidence.js';
import { Deliverer } from './delivery/deliverer.js';
import { HostMetrics } from './metrics.js';
import { childSecrets, loadSpec, sameDefinition, type SecretMap } from './spec-loader.js';

/** How a host is opened: host options plus process-level wiring. */
export interface HostOpenOptions extends HostOptions {
  /** A pino logger, or `false` for none. @default a logger writing `<home>/logs/runwarden.log` */
  logger?: Logger | false;
  /** The worker entry file. @default the compiled `worker/main.js` of this package */
  workerEntry?: string;
  /**
   * Send delivery obligations from the moment the host opens, including those
   * left by earlier hosts (a daemon does). @default false: sending starts when
   * this host first drives a run
   */
  deliver?: boolean;
}

export interface StartOptions {
  /** The spec: an object as parsed from JSON. Validated here. */
  spec: unknown;
  /** The file the spec came from: relative paths in it (cwd, subflow files) resolve against its directory. */
  specPath?: string;
  /** The run id. @default a fresh `run-…` id */
  runId?: string;
  /** The cwd of a spec that sets none. @default process.cwd() */
  cwd?: string;
}

export interface ResumeOptions {
  /** The spec the run started with, to re-supply its secrets (custom-engine env). */
  spec?: unknown;
  specPath?: string;
}

/** A run being driven by this host. */
export interface RunHandle {
  readonly runId: string;
  /** The last committed record. */
  readonly record: RunRecord;
  /** Resolves when driving stops: the run ended, or it was interrupted, superseded or blocked. */
  readonly done: Promise<DriveResult>;
  listen(listeners: DriverListeners): () => void;
}

export type ControlAction = ControlRequest['action'];

/** What became of a control request. */
export interface ControlReceipt {
  controlId: string;
  /** `applied`: the owner applied it; `refused`: the owner declined (see reason); `queued`: durable in the inbox, not yet picked up. */
  status: 'applied' | 'refused' | 'queued';
  reason?: string;
  /** Who applied it, or who holds the run. */
  by?: string;
}

/** Resolve a compiled worker entry (`main.js`, `thread-entry.js`), also when this module runs from source (tests). */
export function defaultWorkerEntry(file = 'main.js'): string {
  const here = dirname(fileURLToPath(import.meta.url));
  const candidates = [resolve(here, '../worker', file), resolve(here, '../../dist/worker', file)];
  const found = candidates.find((c) => existsSync(c));
  if (found === undefined) throw new RunwardenError('WORKER_START_FAILED', `cannot find the worker entry (looked for ${candidates.join(', ')}); run 'npm run build'`);
  return found;
}

export class Host {
  readonly options: CompiledHostOptions;
  readonly store: RunStore;
  readonly owner: OwnerInfo;
  readonly logger: Logger;
  readonly #pools: Record<'process' | 'thread', Pool>;
  readonly #schedulers: Record<'process' | 'thread', Scheduler>;
  readonly #ceiling: EffectivePolicy;
  readonly #leases: LeaseKeeper;
  readonly #drivers = new Map<string, { driver: RunDriver; done: Promise<DriveResult> }>();
  #closing: Promise<void> | undefined;
  /** Sends delivery obligations to the configured sinks. */
  readonly deliverer: Deliverer;
  /** Prometheus metrics of this host. */
  readonly metrics: HostMetrics;

  readonly #closeLog: () => Promise<void>;

  private constructor(options: CompiledHostOptions, logger: Logger, closeLog: () => Promise<void>, workerEntries: { process: string; thread: string }) {
    this.options = options;
    this.logger = logger;
    this.#closeLog = closeLog;
    this.owner = currentOwner(`owner-${randomUUID()}`);
    this.store = new FileRunStore({ home: options.home, leaseTtlMs: options.leaseTtlMs, logger });
    this.#ceiling = compileCeiling(options.policy);
    this.#schedulers = { process: new Scheduler(options.maxConcurrent, options.maxConcurrentPerRun), thread: new Scheduler(options.maxThreads, options.maxConcurrentPerRun) };
    this.#leases = new LeaseKeeper(this.store, options.leaseRenewMs, logger);
    this.deliverer = new Deliverer({ home: options.home, store: this.store, owner: this.owner, options: options.delivery, logger, onSettled: (outcome, sink) => this.metrics.delivery(outcome, sink) });
    this.#pools = {
      process: new ProcessPool({
        workerEntry: workerEntries.process,
        heartbeatMs: options.heartbeatMs,
        heartbeatTimeoutMs: options.heartbeatTimeoutMs,
        killGraceMs: options.killGraceMs,
        idleMs: options.workerIdleMs,
        startTimeoutMs: options.workerStartTimeoutMs,
        recycleAfter: options.recycleAfter,
        minWarm: options.minWarm,
        sampleMs: options.sampleMs,
        logger,
      }),
      thread: new ThreadPool({
        entry: workerEntries.thread,
        maxThreads: options.maxThreads,
        idleMs: options.workerIdleMs,
        heartbeatMs: options.heartbeatMs,
        heartbeatTimeoutMs: options.heartbeatTimeoutMs,
        killGraceMs: options.killGraceMs,
        sampleMs: options.sampleMs,
        logger,
      }),
    };
    this.metrics = new HostMetrics({
      store: this.store,
      outbox: this.deliverer.outbox,
      drivenRuns: () => this.#drivers.size,
      schedulers: () => ({ process: this.#schedulers.process.stats(), thread: this.#schedulers.thread.stats() }),
      pools: () => this.poolStats(),
    });
  }

  /**
   * Open a host on a store home.
   * @throws {ValidationError} `CONFIG_INVALID` for bad options or `config.json`.
   * @example const host = await Host.open({ home: '/tmp/rw' }); const run = await host.start({ spec }); await run.done; await host.close();
   */
  static async open(options: HostOpenOptions = {}): Promise<Host> {
    const { logger, workerEntry, deliver, ...hostOptions } = options;
    const compiled = compileHostOptions(hostOptions);
    const entry = { process: workerEntry ?? defaultWorkerEntry(), thread: defaultWorkerEntry('thread-entry.js') };
    let host: Host;
    if (logger !== undefined) host = new Host(compiled, logger === false ? silentLogger() : logger, () => Promise.resolve(), entry);
    else {
      const own = createHostLogger(compiled.home, compiled.logLevel);
      host = new Host(compiled, own.logger, own.close, entry);
    }
    if (deliver === true) host.#startDelivery();
    return host;
  }

  #startDelivery(): void {
    if (this.deliverer.active && this.#closing === undefined) this.deliverer.start();
  }

  /** Ids of the runs this host drives now. */
  drivenRuns(): string[] {
    return [...this.#drivers.keys()];
  }

  /** Claim-queue counters, by isolation. */
  schedulerStats(): Record<'process' | 'thread', { running: number; queued: number; preempted: number }> {
    return { process: this.#schedulers.process.stats(), thread: this.#schedulers.thread.stats() };
  }

  /** Worker pool counters, by isolation. */
  poolStats(): Record<'process' | 'thread', PoolStats> {
    return { process: this.#pools.process.stats(), thread: this.#pools.thread.stats() };
  }

  #deps(): KernelDeps {
    return {
      store: this.store,
      pools: this.#pools,
      schedulers: this.#schedulers,
      ceiling: this.#ceiling,
      hostBudget: this.options.executionBudget,
      leases: this.#leases,
      logger: this.logger,
      options: this.options,
      runChild: (request) => this.#runChild(request),
      delivery: this.deliverer,
      onCommitted: (ms, events) => this.metrics.committed(ms, events),
    };
  }

  // ------------------------------------------------------------ start and resume

  /**
   * Validate a spec, create the run (atomically claiming it) and start driving it.
   * @throws {SpecError} `SPEC_INVALID` naming the field; nothing is written.
   * @throws {RunwardenError} `RUN_ID_INVALID`, `RUN_EXISTS`.
   */
  async start(options: StartOptions): Promise<RunHandle> {
    this.#assertOpen();
    if (options.runId !== undefined) assertRunId(options.runId);
    const baseDir = options.specPath === undefined ? resolve(options.cwd ?? process.cwd()) : dirname(resolve(options.specPath));
    const loaded = loadSpec(options.spec, { baseDir, defaultCwd: options.cwd ?? process.cwd(), maxDepth: this.options.subflowMaxDepth, ceiling: this.#ceiling }, options.specPath);
    const runId = options.runId ?? newRunId();
    const { guard, record } = await this.#create(runId, loaded.spec, loaded.secretRefs, undefined);
    this.logger.info({ runId, name: loaded.spec.name }, 'run created');
    return this.#drive(new RunDriver(this.#deps(), { guard, spec: loaded.spec, record, secrets: loaded.secrets }));
  }

  async #create(runId: string, spec: WorkflowSpec, secrets: SecretRef[], parent: { record: RunRecord; node: string } | undefined): Promise<{ guard: RunGuard; record: RunRecord }> {
    return this.store.create({
      runId,
      spec,
      owner: this.owner,
      build: (incarnationId) => {
        const first: RunEvent = {
          seq: 1,
          ts: new Date().toISOString(),
          type: 'run_created',
          runId,
          name: spec.name,
          incarnationId,
          cwd: spec.cwd!,
          depth: parent === undefined ? 0 : parent.record.depth + 1,
          nodes: spec.nodes.map((n) => n.id),
          first: spec.nodes[0]!.id,
          secrets,
          ...(parent === undefined ? {} : { parentRunId: parent.record.runId, parentNode: parent.node }),
        };
        return { events: [first], record: createRecord(spec, first) };
      },
    });
  }

  /**
   * Take a run over and continue it at its recorded position.
   * @throws {RunwardenError} `RUN_NOT_FOUND`, `RUN_TERMINAL`, `SECRETS_REQUIRED`, `SPEC_MISMATCH`, `STORE_BLOCKED`.
   * @throws {LeaseHeldError} `LEASE_HELD` when another live process holds it (the message names its pid and host).
   */
  async resume(runId: string, options: ResumeOptions = {}): Promise<RunHandle> {
    this.#assertOpen();
    assertRunId(runId);
    const local = this.#drivers.get(runId);
    if (local !== undefined) return this.#handle(local.driver, local.done);
    const given =
      options.spec === undefined
        ? undefined
        : loadSpec(options.spec, { baseDir: options.specPath === undefined ? process.cwd() : dirname(resolve(options.specPath)), maxDepth: this.options.subflowMaxDepth, ceiling: this.#ceiling }, options.specPath);
    const { guard, run } = await this.#acquire(runId);
    try {
      if (TERMINAL_STATES.has(run.record.state)) throw new RunwardenError('RUN_TERMINAL', `run ${runId} already ended (${run.record.state}, ${run.record.outcome}); nothing to resume`, { field: 'runId' });
      if (given !== undefined && !sameDefinition(given.spec, run.spec)) {
        throw new RunwardenError('SPEC_MISMATCH', `the spec given to re-supply secrets differs from the spec run ${runId} started with (see 'runwarden show ${runId} --spec')`, { field: 'spec' });
      }
      missingSecrets(runId, run.record.secrets, given?.secrets ?? new Map());
    } catch (err) {
      await this.store.release(guard);
      throw err;
    }
    this.logger.info({ runId, fence: guard.fence }, 'run resumed');
    return this.#drive(new RunDriver(this.#deps(), { guard, spec: run.spec, record: run.record, secrets: given?.secrets ?? new Map() }));
  }

  /**
   * Take a run's lease. A lease held for a moment to apply a control request
   * (see {@link control}) is waited out, up to 5 s, rather than refused.
   */
  async #acquire(runId: string, purpose?: 'control'): Promise<{ guard: RunGuard; run: LoadedRun }> {
    const deadline = Date.now() + 5000;
    for (;;) {
      const acquired = await this.store.acquire(runId, this.owner, purpose === undefined ? {} : { purpose });
      switch (acquired.status) {
        case 'acquired':
          return { guard: acquired.guard, run: acquired.run };
        case 'not_found':
          throw notFound(runId);
        case 'held':
          if (acquired.lease.purpose === 'control' && Date.now() < deadline) {
            await new Promise((r) => setTimeout(r, 50));
            continue;
          }
          throw leaseHeld(runId, acquired.lease);
        case 'blocked':
          throw new RunwardenError('STORE_BLOCKED', `run ${runId} is busy (${acquired.reason}); try again`);
      }
    }
  }

  #drive(driver: RunDriver): RunHandle {
    this.#startDelivery();
    const done = driver.drive().finally(() => this.#drivers.delete(driver.runId));
    this.#drivers.set(driver.runId, { driver, done });
    // A start that raced close(): stop at once, resumable, like every other run of this host.
    if (this.#closing !== undefined) driver.interrupt();
    done.then(
      (result) => this.logger.info({ runId: driver.runId, state: result.record.state, outcome: result.record.outcome, stopped: result.stopped }, 'run driver stopped'),
      (err: unknown) => this.logger.error({ runId: driver.runId, err }, 'run driver failed'),
    );
    return this.#handle(driver, done);
  }

  #handle(driver: RunDriver, done: Promise<DriveResult>): RunHandle {
    return {
      runId: driver.runId,
      get record() {
        return driver.record;
      },
      done,
      listen: (listeners) => driver.listen(listeners),
    };
  }

  async #runChild(request: ChildRunRequest): Promise<ChildRunResult> {
    const secrets = childSecrets(request.secrets, request.secretPrefix);
    const parent = request.parent;
    let driver: RunDriver;
    const existing = request.adopt ? await this.store.load(request.childRunId) : undefined;
    try {
      if (existing !== undefined) {
        // Adopt only this node's own child: never another run that happens to hold the id.
        if (existing.record.parentRunId !== parent.runId || existing.record.parentNode !== request.parentNode) {
          return { status: 'refused', message: `run id ${request.childRunId} is taken by a run that is not the child of ${parent.runId} node ${request.parentNode}` };
        }
        if (TERMINAL_STATES.has(existing.record.state)) return { status: 'ended', record: existing.record };
        const { guard, run } = await this.#acquire(request.childRunId);
        driver = new RunDriver(this.#deps(), { guard, spec: run.spec, record: run.record, secrets });
      } else {
        const secretRefs = parent.secrets.filter((r) => r.ref.startsWith(`${request.secretPrefix}/`)).map((r) => ({ ...r, ref: r.ref.slice(request.secretPrefix.length) }));
        const { guard, record } = await this.#create(request.childRunId, request.spec, secretRefs, { record: parent, node: request.parentNode });
        driver = new RunDriver(this.#deps(), { guard, spec: request.spec, record, secrets });
      }
    } catch (err) {
      if (isRunwardenError(err) && (err.code === 'RUN_EXISTS' || err.code === 'LEASE_HELD' || err.code === 'STORE_BLOCKED')) {
        return { status: 'refused', message: `cannot start child run ${request.childRunId}: ${err.message}` };
      }
      throw err;
    }
    const handle = this.#drive(driver);
    const onAbort = (): void => {
      if (request.signal.reason === 'cancel') {
        void this.store
          .postControl(request.childRunId, { id: randomUUID(), action: 'cancel', at: new Date().toISOString(), from: { pid: this.owner.pid, host: this.owner.host } })
          .then(() => driver.pollInbox());
      } else driver.interrupt();
    };
    if (request.signal.aborted) onAbort();
    else request.signal.addEventListener('abort', onAbort, { once: true });
    try {
      const result = await handle.done;
      if (result.stopped === 'blocked') return { status: 'blocked', error: result.error ?? new RunwardenError('STORE_BLOCKED', `child run ${request.childRunId} could not write to the store`) };
      return result.stopped === undefined ? { status: 'ended', record: result.record } : { status: 'stopped' };
    } finally {
      request.signal.removeEventListener('abort', onAbort);
    }
  }

  // ------------------------------------------------------------ control

  /**
   * Send a control request (cancel, steer, approve, reject) to whoever owns the
   * run, through the run's durable inbox. When no live process holds the run,
   * this host applies it itself (and ends a cancelled run) without running any node.
   * Waits up to `waitMs` for the owner to apply it.
   * @throws {RunwardenError} `RUN_NOT_FOUND`, `RUN_TERMINAL`, `OPTION_INVALID` (empty steer text).
   */
  async control(runId: string, action: ControlAction, options: { text?: string; waitMs?: number } = {}): Promise<ControlReceipt> {
    this.#assertOpen();
    assertRunId(runId);
    const parsed = ControlArgsSchema.safeParse({ action, ...options });
    if (!parsed.success) throw new ValidationError('OPTION_INVALID', `${String(action)} request`, zodIssues(parsed.error));
    if (action === 'steer' && (options.text === undefined || options.text.trim() === '')) {
      throw new RunwardenError('OPTION_INVALID', 'steer text must not be empty', { field: 'text' });
    }
    const run = await this.store.load(runId);
    if (run === undefined) throw notFound(runId);
    if (TERMINAL_STATES.has(run.record.state)) throw new RunwardenError('RUN_TERMINAL', `run ${runId} already ended (${run.record.state}); nothing to ${action}`, { field: 'runId' });
    const request: ControlRequest = { id: randomUUID(), action, at: new Date().toISOString(), from: { pid: process.pid, host: this.owner.host } };
    if (options.text !== undefined) request.text = options.text;
    const afterSeq = run.record.seq;
    await this.store.postControl(runId, request);
    const local = this.#drivers.get(runId);
    let by: string | undefined;
    if (local !== undefined) {
      local.driver.pollInbox();
      by = `pid ${process.pid} on ${this.owner.host}`;
    } else if (run.lease !== undefined && this.store.isLeaseLive(run.lease)) {
      by = `pid ${run.lease.pid} on ${run.lease.host}`;
    } else {
      // Nobody holds the run: apply the request here, without running any node.
      try {
        const { guard, run: acquired } = await this.#acquire(runId, 'control');
        const driver = new RunDriver(this.#deps(), { guard, spec: acquired.spec, record: acquired.record, secrets: new Map(), controlsOnly: true });
        await this.#drive(driver).done;
        by = `pid ${process.pid} on ${this.owner.host}, as no process held the run`;
      } catch (err) {
        if (!(err instanceof LeaseHeldError)) throw err;
        by = `pid ${err.owner.pid} on ${err.owner.host}`;
      }
    }
    return this.#awaitControl(runId, request.id, afterSeq, options.waitMs ?? 5000, by);
  }

  async #awaitControl(runId: string, controlId: string, afterSeq: number, waitMs: number, by: string | undefined): Promise<ControlReceipt> {
    const deadline = Date.now() + waitMs;
    for (;;) {
      const events = await this.store.readEvents(runId, afterSeq).catch(() => []);
      const event = events.find((e) => e.type === 'control' && e.controlId === controlId);
      if (event?.type === 'control') {
        const receipt: ControlReceipt = { controlId, status: event.applied ? 'applied' : 'refused' };
        if (event.reason !== undefined) receipt.reason = event.reason;
        if (by !== undefined) receipt.by = by;
        return receipt;
      }
      if (Date.now() >= deadline) return by === undefined ? { controlId, status: 'queued' } : { controlId, status: 'queued', by };
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  // ------------------------------------------------------------ reads and delete

  /** @throws {RunwardenError} `RUN_NOT_FOUND` */
  async show(runId: string): Promise<LoadedRun> {
    assertRunId(runId);
    const run = await this.store.load(runId);
    if (run === undefined) throw notFound(runId);
    return run;
  }

  /** Runs matching `options`, newest first; a run that cannot be read is listed with the reason (`unreadable`). */
  list(options?: ListOptions): Promise<ListedRun[]> {
    return this.store.list(options);
  }

  /**
   * The evidence bundle behind a run's verdict (or the bundle `evidenceId`), and where it lies.
   * @throws {RunwardenError} `RUN_NOT_FOUND`; `EVIDENCE_NOT_FOUND` when no verifier has run, the verdict came from a subflow child (the message names it), or the id is unknown.
   */
  async evidence(runId: string, evidenceId?: string): Promise<{ evidenceId: string; bundle: EvidenceBundle; location: string | undefined }> {
    const run = await this.show(runId);
    const verdict = run.record.lastVerdict;
    if (evidenceId === undefined && verdict?.childRunId !== undefined) {
      throw new RunwardenError('EVIDENCE_NOT_FOUND', `run ${runId}'s verdict came from its subflow child run ${verdict.childRunId}: runwarden evidence ${verdict.childRunId}`, { field: 'runId' });
    }
    const id = evidenceId ?? verdict?.evidenceId;
    if (id === undefined) throw new RunwardenError('EVIDENCE_NOT_FOUND', `run ${runId} has no evidence: no verifier has run`, { field: 'runId' });
    if (!/^[A-Za-z0-9._-]{1,128}$/.test(id) || id.includes('..')) throw new RunwardenError('EVIDENCE_NOT_FOUND', `run ${runId} has no evidence bundle ${id}`, { field: 'evidenceId' });
    const raw = await this.store.readArtifact(runId, `evidence/${id}/bundle.json`);
    if (raw === undefined) throw new RunwardenError('EVIDENCE_NOT_FOUND', `run ${runId} has no evidence bundle ${id}`, { field: 'evidenceId' });
    return { evidenceId: id, bundle: JSON.parse(raw.toString('utf8')) as EvidenceBundle, location: this.store.locate(runId, `evidence/${id}`) };
  }

  /**
   * Delete a run and its subflow children. A run held by a live process is refused; cancel it first.
   * @throws {RunwardenError} `RUN_NOT_FOUND`, `LEASE_HELD`, `STORE_BLOCKED`.
   */
  async delete(runId: string): Promise<string[]> {
    this.#assertOpen();
    assertRunId(runId);
    if (this.#drivers.has(runId)) throw new RunwardenError('LEASE_HELD', `run ${runId} is being driven by pid ${process.pid} on ${this.owner.host}; cancel it first: runwarden cancel ${runId}`, { field: 'runId' });
    const children = (await this.store.list({ includeChildren: true })).filter((s) => 'parentRunId' in s && s.parentRunId === runId).map((s) => s.runId);
    const deleted: string[] = [];
    for (const child of children) deleted.push(...(await this.delete(child)));
    let guard: RunGuard;
    try {
      ({ guard } = await this.#acquire(runId));
    } catch (err) {
      if (err instanceof LeaseHeldError) throw new LeaseHeldError(runId, err.owner, `cancel it first: runwarden cancel ${runId}`);
      throw err;
    }
    const status = await this.store.delete(guard);
    if (status !== 'committed') throw new RunwardenError('STORE_BLOCKED', `run ${runId} could not be deleted (${status}); try again`);
    deleted.push(runId);
    return deleted;
  }

  // ------------------------------------------------------------ lifecycle

  #assertOpen(): void {
    if (this.#closing !== undefined) throw new RunwardenError('OPTION_INVALID', 'the host is closed');
  }

  /**
   * Stop: interrupt every run this host drives (in-flight attempts are marked
   * interrupted and run again on resume), release their leases, stop every
   * worker. Idempotent.
   */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      // Loop: a start that raced this close adds a driver, which #drive interrupts at once.
      for (let running = [...this.#drivers.values()]; running.length > 0; running = [...this.#drivers.values()]) {
        for (const { driver } of running) driver.interrupt();
        await Promise.allSettled(running.map((r) => r.done));
      }
      this.#leases.close();
      await Promise.all([this.#pools.process.close(), this.#pools.thread.close(), this.deliverer.stop()]);
      await new Promise<void>((resolve) => this.logger.flush(() => resolve()));
      await this.#closeLog();
    })();
    return this.#closing;
  }
}

/** What {@link Host.control} accepts. */
const ControlArgsSchema = z.strictObject({
  action: z.enum(['cancel', 'steer', 'approve', 'reject']),
  text: z.string().max(100_000).optional(),
  waitMs: z.number().int().min(0).max(600_000).optional(),
});

function notFound(runId: string): RunwardenError {
  return new RunwardenError('RUN_NOT_FOUND', `no run with id ${runId}`, { field: 'runId' });
}

function missingSecrets(runId: string, refs: readonly SecretRef[], supplied: SecretMap): void {
  const missing = refs.filter((r) => !supplied.has(r.ref));
  if (missing.length === 0) return;
  throw new RunwardenError(
    'SECRETS_REQUIRED',
    `run ${runId} needs its secrets re-supplied (they are never stored): ${missing.map((m) => `${m.label} (env ${m.keys.join(', ')})`).join('; ')}. Pass the spec the run started with: runwarden resume ${runId} --spec <file>`,
    { field: 'spec' },
  );
}

