/** Human-readable output of the CLI: one line per event, the run sheet, tables. */
import { BUDGET_LIMITS, type Budget, type BudgetLimit } from '../protocol/budget.js';
import type { RunEvent, Usage } from '../protocol/events.js';
import type { WorkflowSpec } from '../protocol/spec.js';
import type { RunRecord } from '../protocol/record.js';
import type { ListedRun } from '../store/run-store.js';

export function formatMs(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const minutes = Math.floor(ms / 60_000);
  return `${minutes} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** Text from a run, safe for a terminal: escape sequences and control characters removed. */
export function clean(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f\x9b]/g, '');
}

function firstLine(text: string, max = 160): string {
  const line = clean(text).trim().split('\n')[0] ?? '';
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

function clock(ts: string): string {
  return ts.slice(11, 19);
}

/** One line for an event, or undefined for events not worth a line. */
export function formatEvent(e: RunEvent): string | undefined {
  const line = (text: string): string => `${clock(e.ts)} ${text}`;
  switch (e.type) {
    case 'run_created':
      return line(`run ${e.runId} created: ${e.name} (${e.nodes.length} nodes) in ${e.cwd}`);
    case 'run_state': {
      const detail = e.error !== undefined ? `: ${e.error.code} ${firstLine(e.error.message)}` : e.reason !== undefined ? ` (${e.reason})` : '';
      return line(`■ run ${e.state}${e.outcome !== undefined ? ` · ${e.outcome}` : ''}${detail}`);
    }
    case 'node_started': {
      const cause = e.cause === 'visit' ? '' : ` (${e.cause})`;
      const visit = e.visit > 1 ? `, visit ${e.visit}` : '';
      return line(`▶ ${e.node} attempt ${e.attempt}${cause}${visit}${e.childRunId !== undefined ? ` → child run ${e.childRunId}` : ''}${e.steer !== undefined ? ' (steered)' : ''}`);
    }
    case 'node_succeeded':
      return line(`✓ ${e.node} (${formatMs(e.durationMs)})${e.output !== undefined && e.output.preview.trim() !== '' ? `: ${firstLine(e.output.preview)}` : ''}`);
    case 'node_failed':
      return line(`✗ ${e.node} ${e.error.code}: ${firstLine(e.error.message)}${e.retryInMs !== undefined ? ` — retry in ${formatMs(e.retryInMs)}` : e.next !== undefined ? ' — continuing' : ''}`);
    case 'node_requeued':
      return line(`↻ ${e.node} attempt ${e.attempt} lost (${e.reason}): re-queued — ${firstLine(e.error.message)}`);
    case 'node_interrupted':
      return line(`‖ ${e.node} attempt ${e.attempt} interrupted: ${e.reason}`);
    case 'node_cancelled':
      return line(`✗ ${e.node}${e.attempt !== undefined ? ` attempt ${e.attempt}` : ''} cancelled`);
    case 'node_routed':
      return line(`↪ ${e.node} → ${e.to ?? '(end)'}${typeof e.route === 'number' ? ` (route ${e.route})` : ` (${e.route})`}`);
    case 'gate_opened':
      return line(`⏸ ${e.node} awaits a human: ${firstLine(e.prompt)}`);
    case 'gate_closed':
      return line(`${e.approved ? '✓' : '✗'} ${e.node} ${e.approved ? 'approved' : 'rejected'}`);
    case 'control':
      return line(`⚑ ${e.action}${e.text !== undefined ? ` "${firstLine(e.text, 80)}"` : ''}${e.applied ? '' : ` refused: ${e.reason ?? ''}`}`);
    case 'evidence':
      return line(`${e.passed ? '✓' : '✗'} verdict ${e.passed ? 'passed' : 'failed'} (${e.node}${e.evidenceId !== undefined ? `, evidence ${e.evidenceId}` : e.childRunId !== undefined ? `, child run ${e.childRunId}` : ''})`);
    case 'log':
      return line(`${e.level}: ${e.message}`);
  }
}

function pad(text: string, width: number): string {
  return text.length >= width ? text : text + ' '.repeat(width - text.length);
}

/** A plain text table. */
export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const render = (cells: string[]): string => cells.map((c, i) => (i === cells.length - 1 ? c : pad(c, widths[i]!))).join('  ');
  return [render(headers), ...rows.map(render)].join('\n');
}

export function formatList(runs: ListedRun[]): string {
  if (runs.length === 0) return 'no runs';
  return table(
    ['RUN', 'NAME', 'STATE', 'OUTCOME', 'UPDATED'],
    runs.map((r) => ('unreadable' in r ? [r.runId, '?', 'unreadable', '-', clean(r.unreadable)] : [r.runId, r.name, r.state, r.outcome, r.updatedAt.replace('T', ' ').slice(0, 19)])),
  );
}

const money = (n: number): string => `$${n.toFixed(4)}`;

/** `costUsd $0.9000 of $1.0000 · wallMs 1.2 s of 10.0 s (over)`: a run's usage against each of its limits. */
export function formatRunBudget(budget: Budget, usage: Usage): string {
  const used: Record<BudgetLimit, number> = { wallMs: usage.durationMs, cpuMs: usage.cpuMs, rssMb: usage.peakRssMb, tokens: usage.tokensIn + usage.tokensOut, costUsd: usage.costUsd };
  const show = (limit: BudgetLimit, n: number): string => (limit === 'costUsd' ? money(n) : limit === 'rssMb' ? `${Math.round(n)} MB` : limit === 'tokens' ? String(n) : formatMs(n));
  return BUDGET_LIMITS.filter((l) => budget[l] !== undefined)
    .map((l) => `${l} ${show(l, used[l])} of ${show(l, budget[l]!)}${used[l] > budget[l]! ? ' (over)' : ''}`)
    .join(' · ');
}

/** `wallMs 400 ms · rssMb 256 MB`: the limits of each execution. */
export function formatBudget(budget: Budget): string {
  return BUDGET_LIMITS.filter((l) => budget[l] !== undefined)
    .map((l) => `${l} ${l === 'costUsd' ? money(budget[l]!) : l === 'rssMb' ? `${budget[l]} MB` : l === 'tokens' ? String(budget[l]) : `${budget[l]} ms`}`)
    .join(' · ');
}

/** The run sheet printed by `show`. */
export function formatRun(record: RunRecord, spec: WorkflowSpec, owner: { pid: number; host: string; live: boolean; fence: number } | null, location: string | undefined, evidencePath: string | undefined): string {
  const lines: string[] = [];
  const row = (label: string, value: string): void => {
    lines.push(`${pad(label, 10)} ${value}`);
  };
  row('run', `${record.runId}  ${record.name}`);
  row('state', `${record.state} · ${record.outcome}${record.outcomeReason !== undefined ? ` (${record.outcomeReason})` : ''}`);
  if (record.error !== undefined) row('error', `${record.error.code}: ${record.error.message}`);
  row('cwd', record.cwd);
  if (record.parentRunId !== undefined) row('parent', `${record.parentRunId} (node ${record.parentNode ?? '?'})`);
  row('created', record.createdAt);
  row('updated', record.updatedAt);
  if (record.cursor !== null && !['completed', 'failed', 'cancelled'].includes(record.state)) row('next', record.cursor);
  row('owner', owner === null ? 'none' : `pid ${owner.pid} on ${owner.host} (${owner.live ? 'live' : 'stale'}, fence ${owner.fence})`);
  const u = record.usage;
  row('usage', `${u.executions} executions · ${formatMs(u.durationMs)} · cpu ${formatMs(u.cpuMs)}${u.tokensIn + u.tokensOut > 0 ? ` · ${u.tokensIn + u.tokensOut} tokens` : ''}${u.costUsd > 0 ? ` · $${u.costUsd.toFixed(4)}` : ''}`);
  if (u.peakRssMb > 0) lines[lines.length - 1] += ` · peak ${Math.round(u.peakRssMb)} MB`;
  if (spec.budget !== undefined) row('budget', `run: ${formatRunBudget(spec.budget, u)}`);
  if (spec.executionBudget !== undefined) row(spec.budget === undefined ? 'budget' : '', `per execution: ${formatBudget(spec.executionBudget)}`);
  if (record.gate !== undefined) row('gate', `${record.gate.node}: ${record.gate.prompt}`);
  if (record.pendingSteers.length > 0) row('steers', `${record.pendingSteers.length} waiting for the next agent node`);
  if (evidencePath !== undefined) row('evidence', evidencePath);
  if (location !== undefined) row('store', location);
  lines.push('nodes');
  const nodeRows = Object.entries(record.nodes).map(([id, n]) => [
    `  ${id}`,
    n.kind,
    n.state,
    `visits ${n.visits}`,
    n.attempts.map((a) => `a${a.attempt} ${a.state}${a.error !== undefined ? ` ${a.error.code}` : ''}`).join(', ') || '-',
  ]);
  lines.push(table(['  NODE', 'KIND', 'STATE', 'VISITS', 'ATTEMPTS'], nodeRows).split('\n').slice(1).join('\n'));
  return lines.join('\n');
}
