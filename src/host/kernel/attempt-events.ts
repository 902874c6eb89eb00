/**
 * What an ended attempt commits: pure functions from an attempt's outcome to
 * the events (and artifacts) of its result, its retry, its re-queue, or the
 * failure that ends the run.
 */
import { OUTPUT_PREVIEW_CHARS, type ErrorInfo, type NewRunEvent, type OutputRef, type Usage } from '../../protocol/events.js';
import type { RunRecord } from '../../protocol/record.js';
import { followingNode, type WorkflowNode, type WorkflowSpec } from '../../protocol/spec.js';
import type { Artifact } from '../../store/run-store.js';
import type { AttemptOutcome } from './attempt-outcome.js';
import { evidenceArtifacts, evidenceId } from './evidence.js';

type NodeFailed = Extract<NewRunEvent, { type: 'node_failed' }>;

export interface SettleContext {
  runId: string;
  spec: WorkflowSpec;
  /** The record before the attempt's result. */
  record: RunRecord;
  /** The host's `maxRequeues`, for nodes that set none. */
  maxRequeues: number;
}

/** A final failure: continue to the following node (`onFailure: 'continue'`), or end the run failed. */
export function failureEvents(spec: WorkflowSpec, node: WorkflowNode, failed: NodeFailed, error: ErrorInfo): NewRunEvent[] {
  if ((node.onFailure ?? 'fail') === 'continue') return [{ ...failed, next: followingNode(spec, node.id) }];
  return [failed, { type: 'run_state', state: 'failed', error }];
}

/** A lost claim: a re-queue while the node has re-queues left in this visit, else a failure (never retried). */
export function lossEvents(ctx: SettleContext, node: WorkflowNode, attempt: number, reason: 'worker_lost' | 'heartbeat_timeout' | 'host_lost', error: ErrorInfo, usage?: Usage): NewRunEvent[] {
  const max = node.maxRequeues ?? ctx.maxRequeues;
  const measured = usage === undefined ? {} : { usage };
  if (ctx.record.nodes[node.id]!.requeues < max) return [{ type: 'node_requeued', node: node.id, attempt, reason, error, ...measured }];
  const limit: ErrorInfo = { code: 'REQUEUE_LIMIT', message: `${node.id} lost its claim ${max + 1} times in one visit (maxRequeues ${max}); last: ${error.message}`, node: node.id };
  return failureEvents(ctx.spec, node, { type: 'node_failed', node: node.id, attempt, durationMs: usage?.durationMs ?? 0, error: limit, ...measured }, limit);
}

/** Store an output as an artifact of the attempt and reference it. */
export function outputArtifact(nodeId: string, attempt: number, text: string | undefined, into: Artifact[], totalBytes?: number): OutputRef | undefined {
  if (text === undefined || text === '') return undefined;
  const key = `nodes/${nodeId}/a${attempt}/output.txt`;
  into.push({ key, data: text });
  const ref: OutputRef = { artifact: key, bytes: Buffer.byteLength(text), preview: text.slice(0, OUTPUT_PREVIEW_CHARS) };
  if (totalBytes !== undefined && totalBytes > ref.bytes) ref.totalBytes = totalBytes;
  return ref;
}

/**
 * The events of an attempt that ended with a result: its verdict (evidence
 * bundle or adopted child verdict), then success, a retry (when retryable and
 * `retry.max` allows), or the final failure.
 */
export function resultEvents(
  ctx: SettleContext,
  node: WorkflowNode,
  attempt: number,
  visit: number,
  outcome: Extract<AttemptOutcome, { kind: 'ok' | 'failed' }>,
): { events: NewRunEvent[]; artifacts: Artifact[] } {
  const artifacts: Artifact[] = [];
  const events: NewRunEvent[] = [];
  const output = outputArtifact(node.id, attempt, outcome.output, artifacts, outcome.outputBytes);
  if (outcome.kind === 'ok') for (const extra of outcome.extraOutputs ?? []) artifacts.push({ key: `nodes/${node.id}/a${attempt}/${extra.name}.txt`, data: extra.text });
  if (outcome.verify !== undefined) {
    const id = evidenceId(node.id, visit, attempt);
    const contract = node.kind === 'verifier' ? (node.contract === 'run' ? ctx.spec.contract : node.contract) : undefined;
    const bundle = { evidenceId: id, runId: ctx.runId, node: node.id, visit, attempt, createdAt: new Date().toISOString(), cwd: ctx.record.cwd, passed: outcome.verify.passed, head: outcome.verify.head, digest: outcome.verify.digest };
    artifacts.push(...evidenceArtifacts(contract?.id === undefined ? bundle : { ...bundle, contractId: contract.id }, outcome.verify).artifacts);
    events.push({ type: 'evidence', node: node.id, attempt, evidenceId: id, passed: outcome.verify.passed, digest: outcome.verify.digest });
  }
  if (outcome.childVerdict !== undefined) events.push({ type: 'evidence', node: node.id, attempt, ...outcome.childVerdict });
  if (outcome.kind === 'ok') {
    const succeeded: NewRunEvent = { type: 'node_succeeded', node: node.id, attempt, durationMs: outcome.durationMs, usage: outcome.usage, next: followingNode(ctx.spec, node.id) };
    if (output !== undefined) succeeded.output = output;
    return { events: [...events, succeeded], artifacts };
  }
  const failed: NodeFailed = { type: 'node_failed', node: node.id, attempt, durationMs: outcome.durationMs, error: outcome.error, usage: outcome.usage };
  if (output !== undefined) failed.output = output;
  const retries = ctx.record.nodes[node.id]!.retries;
  if (outcome.retryable && node.retry !== undefined && retries < node.retry.max) {
    // The delay doubles per retry, capped at 5 minutes.
    failed.retryInMs = Math.min(300_000, node.retry.backoffMs * 2 ** retries);
    return { events: [...events, failed], artifacts };
  }
  if (outcome.failsRun === true) return { events: [...events, failed, { type: 'run_state', state: 'failed', error: outcome.error }], artifacts };
  return { events: [...events, ...failureEvents(ctx.spec, node, failed, outcome.error)], artifacts };
}
