/**
 * The run state machine. A driver holds one run's guard, decides the next
 * step from the record, commits it *before* anything runs, hands the work to
 * workers, and commits the result. It never executes node work itself.
 *
 * Every durable change goes through {@link RunDriver.commit}: events are
 * folded into a copy of the record, the store lands the batch whole, and only
 * then does the driver adopt the new record (copy-on-write: a refused write
 * leaves the driver's record where the store's is).
 *
 * Stops: `cancel` (the run ends `cancelled`), `interrupt` (the host is
 * stopping: the in-flight attempt is marked interrupted and the run stays
 * resumable), `superseded` (the lease was lost: no more writes at all).
 */
import { createHash } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import type { Logger } from 'pino';
import { childRunId as makeChildRunId } from '../../protocol/ids.js';
import { RunwardenError } from '../../protocol/errors.js';
import { RunEventSchema, TERMINAL_STATES, type ErrorInfo, type NewRunEvent, type RunEvent, type RunState } from '../../protocol/events.js';
import { evaluateCondition } from '../../protocol/conditions.js';
import type { Task } from '../../protocol/ipc.js';
import { applyEvents, emptyUsage, type RunRecord } from '../../protocol/record.js';
import { describeBreach, type Budget } from '../../protocol/budget.js';
import type { EffectivePolicy } from '../../protocol/policy.js';
import { EXECUTING_KINDS, findNode, followingNode, type NodeOf, type WorkflowNode, type WorkflowSpec } from '../../protocol/spec.js';
import type { Artifact, CommitStatus, RunGuard, RunStore } from '../../store/run-store.js';
import { failpoint } from '../../util/failpoints.js';
import type { CompiledHostOptions } from '../host-options.js';
import type { LeaseKeeper } from '../lease-keeper.js';
import type { ExecutionOutcome, Pool } from '../pool/execution.js';
import type { Scheduler } from '../scheduler.js';
import type { SecretMap } from '../spec-loader.js';
import { PREEMPTED, type AttemptOutcome } from './attempt-outcome.js';
import { lossEvents, resultEvents, type SettleContext } from './attempt-events.js';
import { controlEvent, ending, recheckedEnding } from './decisions.js';
import { resolveAllowList } from '../policy.js';
import { cwdRefusal, exhaustedRunLimit, planExecution, runUsed, type ExecPlan } from './exec-plan.js';
import { digestScope, plannedExecutions, runNodeAttempt, verifierTimeoutMs, type ExecutingNode } from './node-attempt.js';

export type StopReason = 'cancel' | 'interrupt' | 'superseded';

/** What a driver needs from its host. */
export interface KernelDeps {
  store: RunStore;
  /** Pools and their claim queues, by isolation. */
  pools: Record<'process' | 'thread', Pool>;
  schedulers: Record<'process' | 'thread', Scheduler>;
  /** The host's policy ceiling. */
  ceiling: EffectivePolicy;
  /** The host's default execution budget. */
  hostBudget: Budget;
  leases: LeaseKeeper;
  logger: Logger;
  options: CompiledHostOptions;
  /** Start (or adopt, after a crash) a subflow's child run and drive it to an end. */
  runChild(request: ChildRunRequest): Promise<ChildRunResult>;
  /** Delivery obligations: recorded before each commit (write-ahead), sent after it. */
  delivery?: { intend(record: RunRecord, events: readonly RunEvent[]): Promise<void>; kick(): void };
  /** Observes each commit's latency (ms) and its events, for metrics. */
  onCommitted?(durationMs: number, events: readonly RunEvent[]): void;
}

export interface ChildRunRequest {
  parent: RunRecord;
  parentNode: string;
  childRunId: string;
  /** Continue the child run an earlier attempt started (after a crash or interruption), rather than create it. */
  adopt: boolean;
  spec: WorkflowSpec;
  secrets: SecretMap;
  secretPrefix: string;
  signal: AbortSignal;
}

export type ChildRunResult =
  | { status: 'ended'; record: RunRecord }
  | { status: 'stopped' }
  /** The child's store refused its writes: the parent stops the same way. */
  | { status: 'blocked'; error: RunwardenError }
  /** The child could not be started or adopted (its id is taken by another run, or held elsewhere). */
  | { status: 'refused'; message: string };

export interface DriveResult {
  record: RunRecord;
  /** Why driving stopped before the run ended, if it did. */
  stopped?: StopReason | 'blocked';
  error?: RunwardenError;
}

/** Raised inside the driver to unwind after a stop. */
class Stopped extends Error {
  constructor(readonly reason: StopReason | 'blocked') {
    super(`run stopped: ${reason}`);
  }
}

/** Events of a run as they are committed, and non-durable progress of its executions. */
export interface DriverListeners {
  event?(event: RunEvent): void;
  progress?(executionId: string, stream: 'stdout' | 'stderr' | 'log', text: string): void;
}

export class RunDriver {
  readonly #deps: KernelDeps;
  readonly #guard: RunGuard;
  readonly #spec: WorkflowSpec;
  readonly #secrets: SecretMap;
  readonly #controlsOnly: boolean;
  #record: RunRecord;
  #stop: StopReason | undefined;
  readonly #abort = new AbortController();
  #commitChain: Promise<unknown> = Promise.resolve();
  readonly #listeners = new Set<DriverListeners>();
  readonly #waiters = new Set<() => void>();
  #inboxTimer: NodeJS.Timeout | undefined;
  #inboxBusy: Promise<void> | undefined;
  #inboxAgain = false;
  #guardCheck: Promise<void> | undefined;

  constructor(deps: KernelDeps, init: { guard: RunGuard; spec: WorkflowSpec; record: RunRecord; secrets: SecretMap; controlsOnly?: boolean }) {
    this.#deps = deps;
    this.#guard = init.guard;
    this.#spec = init.spec;
    this.#record = init.record;
    this.#secrets = init.secrets;
    this.#controlsOnly = init.controlsOnly ?? false;
    // Every execution of the run (a fan-out may have hundreds) listens on this signal.
    setMaxListeners(0, this.#abort.signal);
  }

  get runId(): string {
    return this.#guard.runId;
  }

  /** The last committed record. */
  get record(): RunRecord {
    return this.#record;
  }

  listen(listeners: DriverListeners): () => void {
    this.#listeners.add(listeners);
    return () => this.#listeners.delete(listeners);
  }

  /** Stop for a host shutdown: the in-flight attempt is marked interrupted; the run stays resumable. */
  interrupt(): void {
    this.#requestStop('interrupt');
  }

  /** Look at the control inbox now rather than at the next poll. */
  pollInbox(): void {
    void this.#drainInbox();
  }

  /**
   * Drive the run until it ends or stops. Never rejects for a run's own
   * failures (they are the run's state); rejects only on a kernel bug.
   */
  async drive(): Promise<DriveResult> {
    this.#deps.leases.hold(this.#guard, () => this.#requestStop('superseded'));
    // One timer for the control inbox and for noticing a takeover between commits (at most once a second).
    let lastGuardCheck = Date.now();
    this.#inboxTimer = setInterval(() => {
      void this.#drainInbox();
      if (Date.now() - lastGuardCheck >= 1000 && this.#guardCheck === undefined) {
        lastGuardCheck = Date.now();
        this.#guardCheck = this.#checkGuard().finally(() => (this.#guardCheck = undefined));
      }
    }, this.#deps.options.controlPollMs);
    this.#inboxTimer.unref();
    try {
      await this.#drainInbox();
      await this.#recoverInFlight();
      if (this.#controlsOnly) {
        if (this.#record.cancelRequested && !this.#ended()) await this.#endCancelled();
        return this.#result(this.#ended() ? undefined : 'interrupt');
      }
      while (!this.#ended()) {
        if (this.#stop === 'superseded') return this.#result('superseded');
        if (this.#record.cancelRequested || this.#stop === 'cancel') {
          await this.#endCancelled();
          break;
        }
        if (this.#stop === 'interrupt') return this.#result('interrupt');
        const cursor = this.#record.cursor;
        if (cursor === null) {
          await this.#finish();
          break;
        }
        const node = findNode(this.#spec, cursor);
        if (node === undefined) throw new Error(`cursor names unknown node ${cursor}`);
        await this.#step(node);
      }
      return this.#result(undefined);
    } catch (err) {
      if (err instanceof Stopped) {
        if (err.reason === 'cancel' && !this.#ended() && this.#stop !== 'superseded') {
          await this.#endCancelled().catch(() => undefined);
          return this.#result(this.#ended() ? undefined : 'cancel');
        }
        return this.#result(err.reason);
      }
      if (err instanceof RunwardenError && err.code === 'STORE_BLOCKED') return { ...this.#result('blocked'), error: err };
      // A bug must not leave the run hanging: record it as the run's end, loudly.
      this.#deps.logger.error({ runId: this.runId, err }, 'internal error while driving the run');
      const message = `internal error: ${err instanceof Error ? err.message : String(err)}`.slice(0, 4000);
      if (!this.#ended() && this.#stop !== 'superseded') {
        const failed = await this.commit([{ type: 'run_state', state: 'failed', error: { code: 'INTERNAL_ERROR', message } }]).then(
          () => true,
          () => false,
        );
        if (failed) return this.#result(undefined);
      }
      throw err;
    } finally {
      clearInterval(this.#inboxTimer);
      await this.#inboxBusy;
      await this.#guardCheck;
      this.#deps.leases.drop(this.runId);
      if (this.#stop !== 'superseded') {
        const released = await this.#deps.store.release(this.#guard).catch(() => 'blocked' as const);
        if (released !== 'committed') this.#deps.logger.warn({ runId: this.runId, status: released }, 'lease release did not commit');
      }
      for (const wake of this.#waiters) wake();
    }
  }

  async #checkGuard(): Promise<void> {
    if (this.#stop === 'superseded' || this.#ended()) return;
    const current = await this.#deps.store.isCurrent(this.#guard).catch(() => true);
    if (!current) {
      this.#deps.logger.warn({ runId: this.runId, fence: this.#guard.fence }, 'lease taken over; stopping this owner and its executions');
      this.#requestStop('superseded');
    }
  }

  #result(stopped: DriveResult['stopped']): DriveResult {
    return stopped === undefined ? { record: this.#record } : { record: this.#record, stopped };
  }

  #ended(): boolean {
    return TERMINAL_STATES.has(this.#record.state);
  }

  #requestStop(reason: StopReason): void {
    if (this.#stop === 'superseded' || this.#stop === reason) return;
    if (this.#stop === 'cancel' && reason === 'interrupt') return;
    this.#stop = reason;
    this.#abort.abort(reason);
    for (const wake of this.#waiters) wake();
  }

  // ------------------------------------------------------------ commits

  /**
   * Land events (and artifacts) whole, then adopt the record they produce.
   * `blocked` is retried with backoff; still blocked, the driver stops and
   * hands its claim back. `superseded` stops it for good.
   */
  async commit(events: NewRunEvent[], artifacts: Artifact[] = []): Promise<void> {
    const run = async (): Promise<void> => {
      if (this.#stop === 'superseded') throw new Stopped('superseded');
      const ts = new Date().toISOString();
      // Nothing invalid ever reaches the durable log: a bad event here is a kernel bug, and it fails loudly.
      const full = events.map((e, i) => RunEventSchema.parse({ ...e, seq: this.#record.seq + 1 + i, ts }));
      const next = applyEvents(this.#record, full);
      // Contention is not a takeover: a refused write is retried with backoff for storeRetryMs, then the run stops, resumable.
      const giveUpAt = Date.now() + this.#deps.options.storeRetryMs;
      for (let tries = 0; ; tries++) {
        const started = performance.now();
        let status: CommitStatus;
        try {
          // Write-ahead: the obligations to report this batch exist before the batch does.
          await this.#deps.delivery?.intend(this.#record, full);
          status = await this.#deps.store.commit(this.#guard, { events: full, record: next, artifacts });
        } catch (err) {
          this.#deps.logger.warn({ runId: this.runId, err: (err as Error).message }, 'delivery obligations could not be recorded');
          status = 'blocked';
        }
        if (status === 'committed') {
          this.#deps.onCommitted?.(performance.now() - started, full);
          this.#deps.delivery?.kick();
          break;
        }
        if (status === 'superseded') {
          this.#requestStop('superseded');
          throw new Stopped('superseded');
        }
        if (Date.now() >= giveUpAt) {
          throw new RunwardenError('STORE_BLOCKED', `run ${this.runId}: the store refused the write ${tries + 1} times over ${this.#deps.options.storeRetryMs} ms (lock contention or a disk fault); the run stopped and can be resumed once the fault clears`);
        }
        if (tries === 0) this.#deps.logger.warn({ runId: this.runId }, 'store refused a commit; retrying');
        await sleep(Math.min(1000, 50 * 2 ** tries));
      }
      this.#record = next;
      for (const event of full) for (const l of this.#listeners) l.event?.(event);
      for (const wake of this.#waiters) wake();
    };
    const result = this.#commitChain.then(run, run);
    this.#commitChain = result.catch(() => undefined);
    return result;
  }

  // ------------------------------------------------------------ control inbox

  #drainInbox(): Promise<void> {
    if (this.#inboxBusy !== undefined) {
      this.#inboxAgain = true;
      return this.#inboxBusy;
    }
    this.#inboxBusy = (async () => {
      try {
        do {
          this.#inboxAgain = false;
          await this.#applyControls();
        } while (this.#inboxAgain);
      } catch (err) {
        if (!(err instanceof Stopped)) this.#deps.logger.warn({ runId: this.runId, err: (err as Error).message }, 'control inbox not applied; will retry');
      } finally {
        this.#inboxBusy = undefined;
      }
    })();
    return this.#inboxBusy;
  }

  async #applyControls(): Promise<void> {
    const requests = await this.#deps.store.pendingControls(this.runId);
    if (requests.length === 0) return;
    const done: string[] = [];
    for (const request of requests) {
      if (this.#stop === 'superseded') return;
      if (!this.#record.recentControls.includes(request.id)) {
        const event = controlEvent(this.#record, request);
        await this.commit([event]);
        if (event.applied && request.action === 'cancel') this.#requestStop('cancel');
      }
      done.push(request.id);
    }
    await this.#deps.store.removeControls(this.runId, done);
  }

  // ------------------------------------------------------------ recovery

  /** After a host died mid-attempt, the attempt's claim is lost: re-queue it (bounded), or fail it past the bound. */
  async #recoverInFlight(): Promise<void> {
    const events: NewRunEvent[] = [];
    const inFlight = this.#record.inFlight;
    if (inFlight !== undefined) {
      const node = findNode(this.#spec, inFlight.node)!;
      const error: ErrorInfo = {
        code: 'HOST_LOST',
        message: `the run's previous owner stopped while attempt ${inFlight.attempt} of ${node.id} was in flight (it exited, was killed, or could not write to the store)`,
        node: node.id,
      };
      events.push(...lossEvents(this.#settleContext(), node, inFlight.attempt, 'host_lost', error));
    }
    if (this.#record.state === 'pending' && !this.#record.cancelRequested && !this.#controlsOnly) events.push({ type: 'run_state', state: 'running' });
    if (events.length > 0) await this.commit(events);
  }

  // ------------------------------------------------------------ steps

  async #step(node: WorkflowNode): Promise<void> {
    if (node.kind === 'router') return this.#route(node);
    if (node.kind === 'human_gate') return this.#gate(node);
    if (node.kind === 'subflow') return this.#subflow(node);
    if (EXECUTING_KINDS.has(node.kind)) return this.#execute(node as ExecutingNode);
  }

  /** A run_state event when the node's kind needs another state. */
  #stateFor(kind: WorkflowNode['kind']): NewRunEvent[] {
    const target: RunState = kind === 'verifier' ? 'verifying' : kind === 'human_gate' ? 'awaiting_human' : 'running';
    return this.#record.state === target ? [] : [{ type: 'run_state', state: target }];
  }

  /** The visit a new entry into `node` would be, or undefined after failing the run for exceeding maxNodeVisits. */
  async #nextVisit(node: WorkflowNode): Promise<number | undefined> {
    const visit = this.#record.nodes[node.id]!.visits + 1;
    if (visit <= this.#spec.maxNodeVisits) return visit;
    const error: ErrorInfo = {
      code: 'MAX_VISITS',
      message: `node ${node.id} would be visited a ${visit}th time; maxNodeVisits is ${this.#spec.maxNodeVisits} (bound the loop with a visits_lt route)`,
      node: node.id,
    };
    await this.commit([{ type: 'run_state', state: 'failed', error }]);
    return undefined;
  }

  async #route(node: NodeOf<'router'>): Promise<void> {
    const visit = await this.#nextVisit(node);
    if (visit === undefined) return;
    const record = this.#record;
    const facts = {
      lastResult: (id: string) => record.nodes[id]?.lastResult,
      verified: (id: string) => record.nodes[id]?.verified ?? false,
      visits: (id: string) => record.nodes[id]?.visits ?? 0,
    };
    const matched = node.routes.findIndex((r) => evaluateCondition(r.when, facts));
    const to = matched >= 0 ? node.routes[matched]!.to : (node.default ?? followingNode(this.#spec, node.id));
    const route = matched >= 0 ? matched : node.default !== undefined ? 'default' : 'next';
    await this.commit([...this.#stateFor('router'), { type: 'node_routed', node: node.id, visit, to, route }]);
  }

  async #gate(node: NodeOf<'human_gate'>): Promise<void> {
    if (this.#record.gate?.node !== node.id) {
      const visit = await this.#nextVisit(node);
      if (visit === undefined) return;
      await this.commit([...this.#stateFor('human_gate'), { type: 'gate_opened', node: node.id, visit, prompt: node.prompt }]);
    }
    await this.#waitFor(() => this.#record.gate?.decision !== undefined || this.#record.cancelRequested);
    const decision = this.#record.gate?.decision;
    if (decision === undefined) return; // cancelled
    if (decision.approved) {
      await this.commit([{ type: 'gate_closed', node: node.id, approved: true, controlId: decision.controlId, next: followingNode(this.#spec, node.id) }]);
      return;
    }
    const error: ErrorInfo = { code: 'GATE_REJECTED', message: `human gate ${node.id} was rejected${decision.text ? `: ${decision.text}` : ''}`, node: node.id };
    const closed: NewRunEvent = { type: 'gate_closed', node: node.id, approved: false, controlId: decision.controlId };
    if ((node.onFailure ?? 'fail') === 'continue') await this.commit([{ ...closed, next: followingNode(this.#spec, node.id) }]);
    else await this.commit([closed, { type: 'run_state', state: 'failed', error }]);
  }

  /** Resolve when `ready()` holds after a commit, or the driver stops (then throw). */
  async #waitFor(ready: () => boolean): Promise<void> {
    while (!ready()) {
      if (this.#stop !== undefined) throw new Stopped(this.#stop);
      await new Promise<void>((resolve) => {
        const wake = (): void => {
          this.#waiters.delete(wake);
          resolve();
        };
        this.#waiters.add(wake);
      });
    }
  }

  /** How the next attempt of `node` starts, its number and visit; undefined when the run just failed on maxNodeVisits. */
  async #nextAttempt(node: WorkflowNode): Promise<{ attempt: number; visit: number; cause: 'visit' | 'retry' | 'requeue' | 'resume' | 'preempted' } | undefined> {
    const nr = this.#record.nodes[node.id]!;
    const attempt = (nr.attempts.at(-1)?.attempt ?? 0) + 1;
    if (nr.resumeAs === undefined) {
      const visit = await this.#nextVisit(node);
      return visit === undefined ? undefined : { attempt, visit, cause: 'visit' };
    }
    if (nr.resumeAs === 'retry' && nr.retryAt !== undefined) {
      const waitMs = Date.parse(nr.retryAt) - Date.now();
      if (waitMs > 0) await sleep(waitMs, this.#abort.signal).catch(() => undefined);
      if (this.#stop !== undefined) throw new Stopped(this.#stop);
    }
    // An interrupted attempt resumes without counting as a re-queue or a retry.
    return { attempt, visit: nr.visits, cause: nr.resumeAs };
  }

  async #execute(node: ExecutingNode): Promise<void> {
    const exhausted = exhaustedRunLimit(this.#spec.budget, this.#record.usage);
    if (exhausted !== undefined) {
      const error: ErrorInfo = { code: 'BUDGET_EXCEEDED', message: `the run's budget is spent: ${describeBreach(exhausted)}; ${node.id} was not started`, node: node.id, detail: { ...exhausted, scope: 'run' } };
      await this.commit([{ type: 'run_state', state: 'failed', error }]);
      return;
    }
    const next = await this.#nextAttempt(node);
    if (next === undefined) return;
    const plan = planExecution(this.runId, node, this.#spec, this.#deps.ceiling, this.#deps.hostBudget);
    const steers = node.kind === 'agent' || node.kind === 'fanout' ? this.#record.pendingSteers : [];
    const steer = steers.length === 0 ? undefined : steers.map((s) => s.text).join('\n\n');
    const started: NewRunEvent = {
      type: 'node_started',
      node: node.id,
      attempt: next.attempt,
      visit: next.visit,
      cause: next.cause,
      executions: plannedExecutions(node, this.runId, next.attempt),
      isolation: plan.isolation,
      policy: plan.policy,
    };
    if (steer !== undefined) started.steer = { ids: steers.map((s) => s.id), text: steer };
    await this.commit([...this.#stateFor(node.kind), started]);
    failpoint('kernel.after-node-started', node.id);
    const timeoutMs = node.timeoutMs ?? (node.kind === 'verifier' ? verifierTimeoutMs(node, this.#spec, this.#deps.options.defaultTimeoutMs) : this.#deps.options.defaultTimeoutMs);
    const outcome = await runNodeAttempt(node, {
      runId: this.runId,
      spec: this.#spec,
      cwd: this.#record.cwd,
      attempt: next.attempt,
      timeoutMs,
      ...(steer === undefined ? {} : { steer }),
      secrets: this.#secrets,
      digestScope: digestScope(this.#spec, this.#deps.options.home),
      signal: this.#abort.signal,
      dispatch: (id, task, ms, signal) => this.#dispatch(id, task, ms, signal, plan),
    });
    failpoint('kernel.before-result-commit', node.id);
    await this.#settleAttempt(node, next.attempt, next.visit, outcome);
  }

  async #dispatch(executionId: string, task: Task, timeoutMs: number, signal: AbortSignal, plan: ExecPlan): Promise<ExecutionOutcome> {
    if ('cwd' in task) {
      const refusal = cwdRefusal(plan.policy, task.cwd);
      if (refusal !== undefined) return { status: 'error', durationMs: 0, result: { type: 'error', code: 'POLICY_DENIED', message: refusal } };
    }
    let release: () => void;
    // Preemption stops this execution only; the attempt's own signal (cancel, interrupt) stays untouched.
    const preempt = new AbortController();
    try {
      release = await this.#deps.schedulers[plan.isolation].acquire(this.runId, signal, {
        priority: plan.priority,
        onPreempt: () => {
          this.#deps.logger.info({ runId: this.runId, executionId }, 'background execution preempted for foreground work');
          preempt.abort(PREEMPTED);
        },
      });
    } catch (reason) {
      return { status: 'aborted', reason, durationMs: 0 };
    }
    try {
      if (preempt.signal.aborted) return { status: 'aborted', reason: PREEMPTED, durationMs: 0 };
      const outcome = await this.#deps.pools[plan.isolation].execute({
        executionId,
        fence: this.#guard.fence,
        task,
        worker: plan.worker,
        commands: resolveAllowList(plan.policy.commands),
        limits: { execution: plan.budget, run: this.#spec.budget ?? {}, runUsed: runUsed(this.#record.usage) },
        timeoutMs,
        signal: AbortSignal.any([signal, preempt.signal]),
        onProgress: (stream, text) => {
          for (const l of this.#listeners) l.progress?.(executionId, stream, text);
        },
      });
      // Stopped because of the preemption alone: say so, whatever the pool reported as the reason.
      if (outcome.status === 'aborted' && preempt.signal.aborted && !signal.aborted) return { ...outcome, reason: PREEMPTED };
      return outcome;
    } finally {
      release();
    }
  }

  #settleContext(): SettleContext {
    return { runId: this.runId, spec: this.#spec, record: this.#record, maxRequeues: this.#deps.options.maxRequeues };
  }

  /** Commit how an attempt ended. */
  async #settleAttempt(node: WorkflowNode, attempt: number, visit: number, outcome: AttemptOutcome): Promise<void> {
    if (outcome.kind === 'stopped') {
      const reason = this.#stop ?? 'interrupt';
      if (reason === 'superseded') throw new Stopped('superseded');
      if (reason === 'cancel') {
        await this.commit([{ type: 'node_cancelled', node: node.id, attempt, usage: outcome.usage }, this.#cancelledState()]);
        return;
      }
      await this.commit([{ type: 'node_interrupted', node: node.id, attempt, reason: 'the host is stopping', usage: outcome.usage }]);
      throw new Stopped('interrupt');
    }
    if (outcome.kind === 'preempted') {
      const error: ErrorInfo = { code: 'PREEMPTED', message: `${node.id} gave its slot to foreground work; it runs again when a slot frees`, node: node.id };
      await this.commit([{ type: 'node_requeued', node: node.id, attempt, reason: 'preempted', error, usage: outcome.usage }]);
      return;
    }
    if (outcome.kind === 'lost') {
      this.#deps.logger.warn({ runId: this.runId, node: node.id, attempt, reason: outcome.reason }, outcome.error.message);
      await this.commit(lossEvents(this.#settleContext(), node, attempt, outcome.reason, outcome.error, outcome.usage));
      return;
    }
    const { events, artifacts } = resultEvents(this.#settleContext(), node, attempt, visit, outcome);
    await this.commit(events, artifacts);
  }

  // ------------------------------------------------------------ subflows

  async #subflow(node: NodeOf<'subflow'>): Promise<void> {
    const next = await this.#nextAttempt(node);
    if (next === undefined) return;
    if (typeof node.workflow !== 'object') throw new Error(`subflow ${node.id} was not inlined when the run was created`);
    const nr = this.#record.nodes[node.id]!;
    // After a lost or interrupted attempt, adopt the child run it started: the child resumes at its own node boundary.
    const previous = nr.attempts.at(-1);
    const adopt = next.cause !== 'retry' && previous?.state !== 'succeeded' && previous?.childRunId !== undefined && previous.visit === next.visit;
    const childRunId = adopt ? previous!.childRunId! : makeChildRunId(this.runId, node.id, next.attempt, (s) => createHash('sha256').update(s).digest('hex'));
    await this.commit([...this.#stateFor('subflow'), { type: 'node_started', node: node.id, attempt: next.attempt, visit: next.visit, cause: next.cause, executions: [], childRunId }]);
    failpoint('kernel.after-node-started', node.id);
    const started = Date.now();
    const index = this.#spec.nodes.indexOf(node);
    const result = await this.#deps.runChild({
      parent: this.#record,
      parentNode: node.id,
      childRunId,
      adopt,
      spec: node.workflow,
      secrets: this.#secrets,
      secretPrefix: `/nodes/${index}/workflow`,
      signal: this.#abort.signal,
    });
    const durationMs = Date.now() - started;
    if (result.status === 'blocked') throw result.error;
    await this.#settleAttempt(node, next.attempt, next.visit, subflowOutcome(result, node.id, childRunId, durationMs, this.#stop !== undefined));
  }

  // ------------------------------------------------------------ the end

  #cancelledState(): NewRunEvent {
    return { type: 'run_state', state: 'cancelled', error: { code: 'CANCELLED', message: 'the run was cancelled' } };
  }

  async #endCancelled(): Promise<void> {
    const events: NewRunEvent[] = [];
    if (this.#record.inFlight !== undefined) events.push({ type: 'node_cancelled', node: this.#record.inFlight.node, attempt: this.#record.inFlight.attempt });
    else if (this.#record.gate !== undefined) events.push({ type: 'node_cancelled', node: this.#record.gate.node });
    events.push(this.#cancelledState());
    await this.commit(events);
  }

  /**
   * The terminal barrier. The run enters `verifying` and its outcome is
   * settled: no verdict → `unverified`; a failed verdict → `refuted` (the run
   * fails); a passing verdict stands only while it still describes the tree —
   * if a workspace-touching node ran after it, the digest is recomputed, and a
   * moved (or unknowable) tree makes the outcome `unverified` with the reason.
   */
  async #finish(): Promise<void> {
    const closing: NewRunEvent[] = this.#record.pendingSteers.map((steer) => ({
      type: 'log',
      level: 'warn',
      message: `steer ${steer.id} never reached an agent node: no agent node ran after it`,
    }));
    const end = ending(this.#record, this.#spec);
    if (end.kind === 'final') {
      await this.commit([...this.#stateFor('verifier'), ...closing, end.event]);
      return;
    }
    if (this.#record.state !== 'verifying') await this.commit(this.#stateFor('verifier'));
    let digestNow: string | null | undefined = null;
    if (end.digest !== null) {
      const task: Task = { kind: 'digest', cwd: end.verdictSpec.cwd ?? this.#record.cwd, scope: digestScope(end.verdictSpec, this.#deps.options.home) };
      // runwarden's own work: the run's policy for env and files, any command (it runs git).
      const internal = planExecution(this.runId, { id: '__finish', kind: 'verifier', contract: 'run' }, this.#spec, this.#deps.ceiling, {});
      const plan: ExecPlan = { ...internal, policy: { ...internal.policy, commands: ['*'] } };
      const outcome = await this.#dispatch(`${this.runId}/__finish/digest-${this.#record.seq}`, task, this.#deps.options.defaultTimeoutMs, this.#abort.signal, plan);
      if (outcome.status === 'aborted') throw new Stopped(this.#stop ?? 'interrupt');
      digestNow = outcome.status === 'ok' ? (outcome.result.digest ?? null) : undefined;
    }
    await this.commit([...closing, recheckedEnding(this.#record, digestNow)]);
  }
}

/** A subflow attempt's outcome from how its child run ended. */
function subflowOutcome(result: Exclude<ChildRunResult, { status: 'blocked' }>, nodeId: string, childRunId: string, durationMs: number, stopping: boolean): AttemptOutcome {
  const none = { ...emptyUsage(), durationMs };
  // A child that ended because this run is stopping (a cancel passed down) is a stop, not a failure.
  if (result.status === 'stopped' || stopping) return { kind: 'stopped', usage: none, durationMs };
  if (result.status === 'refused') return { kind: 'failed', error: { code: 'SUBFLOW_FAILED', message: result.message, node: nodeId }, usage: none, durationMs, retryable: false };
  const child = result.record;
  const summary = `child run ${childRunId} ${child.state} (${child.outcome})${child.error ? `: ${child.error.message}` : ''}`;
  const childVerdict = child.lastVerdict === undefined ? undefined : { passed: child.outcome === 'verified', digest: child.lastVerdict.digest, childRunId };
  const common = { usage: child.usage, durationMs, output: `${summary}\n`, ...(childVerdict === undefined ? {} : { childVerdict }) };
  if (child.state === 'completed') return { kind: 'ok', ...common };
  return { kind: 'failed', error: { code: 'SUBFLOW_FAILED', message: summary, node: nodeId }, retryable: child.state !== 'cancelled', ...common };
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
