/**
 * The kernel's pure decisions: how a control request applies to a run, and
 * what outcome a run ends with. No I/O; the driver commits what these return.
 */
import type { ErrorInfo, NewRunEvent } from '../../protocol/events.js';
import { TERMINAL_STATES } from '../../protocol/events.js';
import type { RunRecord } from '../../protocol/record.js';
import { findNode, type WorkflowSpec } from '../../protocol/spec.js';
import type { ControlRequest } from '../../store/run-store.js';

/**
 * The `control` event recording a request: applied, or refused with the
 * reason (the run ended; an approval while no gate waits, or after it was decided).
 */
export function controlEvent(record: RunRecord, request: ControlRequest): Extract<NewRunEvent, { type: 'control' }> {
  let reason: string | undefined;
  if (TERMINAL_STATES.has(record.state)) reason = `the run already ended (${record.state})`;
  else if (request.action === 'approve' || request.action === 'reject') {
    if (record.gate === undefined) reason = `the run is not awaiting a human decision (state ${record.state})`;
    else if (record.gate.decision !== undefined) reason = 'the gate was already decided';
  }
  const event: Extract<NewRunEvent, { type: 'control' }> = { type: 'control', controlId: request.id, action: request.action, applied: reason === undefined };
  if (request.text !== undefined) event.text = request.text;
  if (reason !== undefined) event.reason = reason;
  return event;
}

/**
 * How a run that reached its end settles, at the terminal barrier:
 * - no verdict: `completed · unverified`, with why;
 * - a failed verdict: `failed · refuted`;
 * - a passing verdict nothing touched the tree after: `completed · verified`;
 * - a passing verdict older than a workspace-touching node: `recheck` — the
 *   tree must be re-digested with the scope of `verdictSpec` and compared.
 */
export type Ending = { kind: 'final'; event: NewRunEvent } | { kind: 'recheck'; digest: string | null; verdictSpec: WorkflowSpec };

export function ending(record: RunRecord, spec: WorkflowSpec): Ending {
  const verdict = record.lastVerdict;
  if (verdict === undefined) {
    const reason = spec.contract === undefined && !spec.nodes.some((n) => n.kind === 'verifier') ? 'the workflow has no contract' : 'no verifier ran';
    return { kind: 'final', event: { type: 'run_state', state: 'completed', outcome: 'unverified', reason } };
  }
  if (!verdict.passed) {
    const error: ErrorInfo = { code: 'REFUTED', message: `the last verdict (${verdict.node}, attempt ${verdict.attempt}) failed: the contract does not hold`, node: verdict.node };
    return { kind: 'final', event: { type: 'run_state', state: 'failed', outcome: 'refuted', error } };
  }
  if (record.sideEffectSeq === verdict.sideEffectSeq) return { kind: 'final', event: { type: 'run_state', state: 'completed', outcome: 'verified' } };
  // Re-digest exactly as the verdict was digested: a subflow's verdict with its child spec's scope.
  const node = findNode(spec, verdict.node);
  const verdictSpec = verdict.childRunId !== undefined && node?.kind === 'subflow' && typeof node.workflow === 'object' ? node.workflow : spec;
  return { kind: 'recheck', digest: verdict.digest, verdictSpec };
}

/** The final event after a recheck: `digest` is the tree now, `undefined` if it could not be computed. */
export function recheckedEnding(record: RunRecord, digestNow: string | null | undefined): NewRunEvent {
  const verdict = record.lastVerdict!;
  let reason: string | undefined;
  if (verdict.digest === null || digestNow === null) reason = 'a workspace-touching node ran after the last passing verdict, and the tree cannot be digested (not a git repository)';
  else if (digestNow === undefined) reason = 'the working tree could not be re-digested after the last passing verdict';
  else if (digestNow !== verdict.digest) reason = `the working tree changed after the last passing verdict (${verdict.node}, attempt ${verdict.attempt}): a workspace-touching node ran after it`;
  return reason === undefined ? { type: 'run_state', state: 'completed', outcome: 'verified' } : { type: 'run_state', state: 'completed', outcome: 'unverified', reason };
}
