/**
 * The run record and the pure fold that builds it from events.
 *
 * `run.json` is a checkpoint of {@link replay}: folding every event of
 * `events.jsonl`, in order, over {@link createRecord}. The kernel produces its
 * next record the same way (apply the batch's events to a copy), so the record
 * on disk and the replay of the log cannot disagree.
 */
import type { ErrorInfo, OutputRef, RunEvent, RunOutcome, RunState, SecretRef, Usage } from './events.js';
import type { EffectivePolicy } from './policy.js';
import { TERMINAL_STATES } from './events.js';
import type { NodeKind, WorkflowSpec } from './spec.js';
import { WORKSPACE_KINDS } from './spec.js';

/** The lifecycle of a node within a run. */
export type NodeState = 'pending' | 'running' | 'awaiting_human' | 'succeeded' | 'failed' | 'skipped' | 'cancelled';

/**
 * The lifecycle of one attempt:
 * - `running`: committed as started; its executions are out with workers.
 * - `succeeded` / `failed`: its result was committed.
 * - `lost`: its worker or host died before a result; the node was re-queued.
 * - `interrupted`: the host stopped on purpose; the node runs again on resume.
 * - `cancelled`: the run was cancelled while it ran.
 */
export type AttemptState = 'running' | 'succeeded' | 'failed' | 'lost' | 'preempted' | 'interrupted' | 'cancelled';

export interface AttemptRecord {
  attempt: number;
  visit: number;
  cause: 'visit' | 'retry' | 'requeue' | 'resume' | 'preempted';
  /** Execution ids (`<runId>/<nodeId>/a<n>[/<member>]`). Empty for subflows. */
  executions: string[];
  state: AttemptState;
  startedAt: string;
  endedAt?: string;
  durationMs?: number;
  error?: ErrorInfo;
  output?: OutputRef;
  usage?: Usage;
  childRunId?: string;
  evidenceId?: string;
  isolation?: 'process' | 'thread';
  /** The effective policy the attempt ran under. */
  policy?: EffectivePolicy;
  /** Steers this attempt carried; they return to the run's pending steers if it does not complete. */
  steers?: Array<{ id: string; text: string; at: string }>;
}

export interface NodeRecord {
  kind: NodeKind;
  state: NodeState;
  /** Times the node was entered (retries and re-queues are not visits). */
  visits: number;
  /** Re-queues in the current visit (bounded by `maxRequeues`). */
  requeues: number;
  /** Retries in the current visit (bounded by `retry.max`). */
  retries: number;
  /** The last finished result, for `node_failed` / `node_succeeded` conditions. */
  lastResult?: 'succeeded' | 'failed';
  /** Whether the node's latest verdict passed (verifier and subflow nodes). */
  verified: boolean;
  /**
   * How the node's next attempt starts, when it continues the current visit:
   * after a failure with retries left (`retry`, at `retryAt`), a lost claim
   * (`requeue`) or an interruption (`resume`). Absent: a new visit.
   */
  resumeAs?: 'retry' | 'requeue' | 'resume' | 'preempted';
  retryAt?: string;
  attempts: AttemptRecord[];
}

export interface VerdictRecord {
  node: string;
  attempt: number;
  evidenceId?: string;
  childRunId?: string;
  passed: boolean;
  /** The working-tree digest the checks ran against; null outside git. */
  digest: string | null;
  /** {@link RunRecord.sideEffectSeq} when the verdict was recorded. */
  sideEffectSeq: number;
}

export interface RunRecord {
  /** Version of this shape. */
  v: 1;
  runId: string;
  name: string;
  incarnationId: string;
  cwd: string;
  parentRunId?: string;
  parentNode?: string;
  /** Subflow nesting depth: 0 for a top-level run. */
  depth: number;
  createdAt: string;
  updatedAt: string;
  /** The seq of the last event folded in. */
  seq: number;
  state: RunState;
  outcome: RunOutcome;
  outcomeReason?: string;
  error?: ErrorInfo;
  /** The node to run next, or in flight; null at the end. Resume continues here. */
  cursor: string | null;
  /** The attempt committed as started and not yet finished. */
  inFlight?: { node: string; attempt: number };
  cancelRequested: boolean;
  pendingSteers: Array<{ id: string; text: string; at: string }>;
  gate?: { node: string; prompt: string; decision?: { approved: boolean; controlId: string; text?: string } };
  /** Counts starts of workspace-touching nodes; a verdict older than the last one is re-checked at the end. */
  sideEffectSeq: number;
  lastVerdict?: VerdictRecord;
  nodes: Record<string, NodeRecord>;
  usage: Usage;
  secrets: SecretRef[];
  /** Ids of the last applied control requests, so a re-read inbox entry is not applied twice. */
  recentControls: string[];
}

/** How many applied control ids a record remembers. */
export const RECENT_CONTROLS = 64;

/**
 * Output previews kept in the record, in characters. Events carry the longer
 * preview and the artifact the whole output: the record stays small, so a
 * commit's cost does not grow with the outputs of the run.
 */
export const RECORD_PREVIEW_CHARS = 200;

/** A kernel bug or a corrupt log: an event that cannot follow the record. */
export class RecordFoldError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RecordFoldError';
  }
}

const TRANSITIONS: Record<RunState, readonly RunState[]> = {
  pending: ['running', 'failed', 'cancelled'],
  running: ['awaiting_human', 'verifying', 'failed', 'cancelled'],
  awaiting_human: ['running', 'verifying', 'failed', 'cancelled'],
  verifying: ['running', 'awaiting_human', 'completed', 'failed', 'cancelled'],
  completed: [],
  failed: [],
  cancelled: [],
};

/** Whether a run may move from `from` to `to`. `completed` is reachable only from `verifying`. */
export function canTransition(from: RunState, to: RunState): boolean {
  return TRANSITIONS[from].includes(to);
}

export function emptyUsage(): Usage {
  return { executions: 0, durationMs: 0, cpuMs: 0, tokensIn: 0, tokensOut: 0, costUsd: 0, peakRssMb: 0 };
}

export function addUsage(into: Usage, more: Usage | undefined): void {
  if (more === undefined) return;
  into.executions += more.executions;
  into.durationMs += more.durationMs;
  into.cpuMs += more.cpuMs;
  into.tokensIn += more.tokensIn;
  into.tokensOut += more.tokensOut;
  into.costUsd = Math.round((into.costUsd + more.costUsd) * 1e9) / 1e9;
  into.peakRssMb = Math.max(into.peakRssMb, more.peakRssMb);
}

/**
 * The record a run starts with, from its spec and its first event.
 * @throws {RecordFoldError} when the first event is not `run_created` with seq 1.
 */
export function createRecord(spec: WorkflowSpec, first: RunEvent): RunRecord {
  if (first.type !== 'run_created' || first.seq !== 1) throw new RecordFoldError(`the first event must be run_created with seq 1 (got ${first.type} seq ${first.seq})`);
  const nodes: Record<string, NodeRecord> = {};
  for (const node of spec.nodes) {
    nodes[node.id] = { kind: node.kind, state: 'pending', visits: 0, requeues: 0, retries: 0, verified: false, attempts: [] };
  }
  const record: RunRecord = {
    v: 1,
    runId: first.runId,
    name: first.name,
    incarnationId: first.incarnationId,
    cwd: first.cwd,
    depth: first.depth,
    createdAt: first.ts,
    updatedAt: first.ts,
    seq: 1,
    state: 'pending',
    outcome: 'unverified',
    cursor: first.first,
    cancelRequested: false,
    pendingSteers: [],
    sideEffectSeq: 0,
    nodes,
    usage: emptyUsage(),
    secrets: first.secrets,
    recentControls: [],
  };
  if (first.parentRunId !== undefined) record.parentRunId = first.parentRunId;
  if (first.parentNode !== undefined) record.parentNode = first.parentNode;
  return record;
}

/**
 * Fold one event into a record, in place. Callers that must not change the
 * record on failure apply to a copy ({@link applyEvents} does).
 * @throws {RecordFoldError} on a seq gap or duplicate, an unknown node, or a forbidden state transition.
 */
export function applyEvent(record: RunRecord, event: RunEvent): void {
  if (event.seq !== record.seq + 1) throw new RecordFoldError(`event seq ${event.seq} does not follow ${record.seq}`);
  record.seq = event.seq;
  record.updatedAt = event.ts;
  switch (event.type) {
    case 'run_created':
      throw new RecordFoldError('run_created may only be the first event');
    case 'run_state': {
      if (!canTransition(record.state, event.state)) throw new RecordFoldError(`run state cannot move from ${record.state} to ${event.state}`);
      record.state = event.state;
      if (event.outcome !== undefined) record.outcome = event.outcome;
      if (event.reason !== undefined) record.outcomeReason = event.reason;
      if (event.error !== undefined) record.error = event.error;
      if (TERMINAL_STATES.has(event.state)) {
        for (const node of Object.values(record.nodes)) if (node.visits === 0 && node.state === 'pending') node.state = 'skipped';
        delete record.gate;
      }
      return;
    }
    case 'node_started': {
      const node = nodeOf(record, event.node);
      if (record.inFlight !== undefined) throw new RecordFoldError(`node ${event.node} started while ${record.inFlight.node} a${record.inFlight.attempt} is in flight`);
      node.visits = event.visit;
      if (event.cause === 'visit') {
        node.requeues = 0;
        node.retries = 0;
      } else if (event.cause === 'retry') node.retries += 1;
      else if (event.cause === 'requeue') node.requeues += 1;
      node.state = 'running';
      delete node.resumeAs;
      delete node.retryAt;
      const attempt: AttemptRecord = { attempt: event.attempt, visit: event.visit, cause: event.cause, executions: event.executions, state: 'running', startedAt: event.ts };
      if (event.childRunId !== undefined) attempt.childRunId = event.childRunId;
      if (event.isolation !== undefined) attempt.isolation = event.isolation;
      if (event.policy !== undefined) attempt.policy = event.policy;
      node.attempts.push(attempt);
      record.cursor = event.node;
      record.inFlight = { node: event.node, attempt: event.attempt };
      if (WORKSPACE_KINDS.has(node.kind)) record.sideEffectSeq += 1;
      if (event.steer !== undefined) {
        const used = new Set(event.steer.ids);
        attempt.steers = record.pendingSteers.filter((s) => used.has(s.id));
        record.pendingSteers = record.pendingSteers.filter((s) => !used.has(s.id));
      }
      return;
    }
    case 'node_requeued':
    case 'node_interrupted': {
      const node = nodeOf(record, event.node);
      const preempted = event.type === 'node_requeued' && event.reason === 'preempted';
      const attempt = finishAttempt(record, event.node, event.attempt, event.type === 'node_interrupted' ? 'interrupted' : preempted ? 'preempted' : 'lost', event.ts);
      if (event.type === 'node_requeued') attempt.error = event.error;
      if (event.usage !== undefined) {
        attempt.usage = event.usage;
        addUsage(record.usage, event.usage);
      }
      node.state = 'pending';
      // A preempted attempt, like an interrupted one, runs again without counting as a re-queue.
      node.resumeAs = event.type === 'node_interrupted' ? 'resume' : preempted ? 'preempted' : 'requeue';
      returnSteers(record, attempt);
      return;
    }
    case 'node_succeeded':
    case 'node_failed': {
      const node = nodeOf(record, event.node);
      const ok = event.type === 'node_succeeded';
      const attempt = finishAttempt(record, event.node, event.attempt, ok ? 'succeeded' : 'failed', event.ts);
      attempt.durationMs = event.durationMs;
      if (event.output !== undefined) attempt.output = { ...event.output, preview: event.output.preview.slice(0, RECORD_PREVIEW_CHARS) };
      if (event.usage !== undefined) {
        attempt.usage = event.usage;
        addUsage(record.usage, event.usage);
      }
      node.state = ok ? 'succeeded' : 'failed';
      node.lastResult = ok ? 'succeeded' : 'failed';
      if (event.type === 'node_failed') attempt.error = event.error;
      if (event.type === 'node_succeeded') record.cursor = event.next;
      else if (event.retryInMs !== undefined) {
        returnSteers(record, attempt);
        node.resumeAs = 'retry';
        node.retryAt = new Date(Date.parse(event.ts) + event.retryInMs).toISOString();
      } else if (event.next !== undefined) record.cursor = event.next;
      if (record.gate?.node === event.node) delete record.gate;
      return;
    }
    case 'node_cancelled': {
      const node = nodeOf(record, event.node);
      if (event.attempt !== undefined) {
        const attempt = finishAttempt(record, event.node, event.attempt, 'cancelled', event.ts);
        if (event.usage !== undefined) {
          attempt.usage = event.usage;
          addUsage(record.usage, event.usage);
        }
      }
      node.state = 'cancelled';
      if (record.gate?.node === event.node) delete record.gate;
      return;
    }
    case 'node_routed': {
      const node = nodeOf(record, event.node);
      node.visits = event.visit;
      node.state = 'succeeded';
      node.lastResult = 'succeeded';
      record.cursor = event.to;
      return;
    }
    case 'gate_opened': {
      const node = nodeOf(record, event.node);
      node.visits = event.visit;
      node.state = 'awaiting_human';
      record.cursor = event.node;
      record.gate = { node: event.node, prompt: event.prompt };
      return;
    }
    case 'gate_closed': {
      const node = nodeOf(record, event.node);
      node.state = event.approved ? 'succeeded' : 'failed';
      node.lastResult = event.approved ? 'succeeded' : 'failed';
      if (event.next !== undefined) record.cursor = event.next;
      delete record.gate;
      return;
    }
    case 'control': {
      record.recentControls.push(event.controlId);
      if (record.recentControls.length > RECENT_CONTROLS) record.recentControls.splice(0, record.recentControls.length - RECENT_CONTROLS);
      if (!event.applied) return;
      if (event.action === 'cancel') record.cancelRequested = true;
      else if (event.action === 'steer') record.pendingSteers.push({ id: event.controlId, text: event.text ?? '', at: event.ts });
      else if (record.gate !== undefined) {
        record.gate.decision = { approved: event.action === 'approve', controlId: event.controlId };
        if (event.text !== undefined) record.gate.decision.text = event.text;
      }
      return;
    }
    case 'evidence': {
      const node = nodeOf(record, event.node);
      node.verified = event.passed;
      const attempt = node.attempts.find((a) => a.attempt === event.attempt);
      if (attempt !== undefined && event.evidenceId !== undefined) attempt.evidenceId = event.evidenceId;
      const verdict: VerdictRecord = { node: event.node, attempt: event.attempt, passed: event.passed, digest: event.digest, sideEffectSeq: record.sideEffectSeq };
      if (event.evidenceId !== undefined) verdict.evidenceId = event.evidenceId;
      if (event.childRunId !== undefined) verdict.childRunId = event.childRunId;
      record.lastVerdict = verdict;
      record.outcome = event.passed ? 'verified' : 'refuted';
      return;
    }
    case 'log':
      return;
  }
}

/** An attempt that did not complete gives its steers back, ahead of newer ones: a steer is never dropped. */
function returnSteers(record: RunRecord, attempt: AttemptRecord): void {
  if (attempt.steers === undefined || attempt.steers.length === 0) return;
  const pending = new Set(record.pendingSteers.map((s) => s.id));
  record.pendingSteers = [...attempt.steers.filter((s) => !pending.has(s.id)), ...record.pendingSteers];
}

function nodeOf(record: RunRecord, id: string): NodeRecord {
  const node = record.nodes[id];
  if (node === undefined) throw new RecordFoldError(`event names unknown node '${id}'`);
  return node;
}

function finishAttempt(record: RunRecord, nodeId: string, n: number, state: AttemptState, ts: string): AttemptRecord {
  const attempt = record.nodes[nodeId]!.attempts.find((a) => a.attempt === n);
  if (attempt === undefined) throw new RecordFoldError(`node ${nodeId} has no attempt ${n}`);
  if (attempt.state !== 'running') throw new RecordFoldError(`attempt ${n} of ${nodeId} already ended (${attempt.state})`);
  attempt.state = state;
  attempt.endedAt = ts;
  if (record.inFlight?.node === nodeId && record.inFlight.attempt === n) delete record.inFlight;
  return attempt;
}

/** Apply events to a copy of the record; the original is untouched. */
export function applyEvents(record: RunRecord, events: readonly RunEvent[]): RunRecord {
  const next = structuredClone(record);
  for (const event of events) applyEvent(next, event);
  return next;
}

/**
 * Rebuild a record from the spec and the whole event log.
 * @throws {RecordFoldError} if the log is empty, has a gap or duplicate, or cannot be folded.
 */
export function replay(spec: WorkflowSpec, events: readonly RunEvent[]): RunRecord {
  const [first, ...rest] = events;
  if (first === undefined) throw new RecordFoldError('the event log is empty');
  const record = createRecord(spec, first);
  for (const event of rest) applyEvent(record, event);
  return record;
}
