/** Filtering, ordering and paging of run listings: the same for every store. */
import { RunwardenError } from '../protocol/errors.js';
import type { ListedRun, ListOptions } from './run-store.js';

/**
 * Apply `options` to a listing: drop children unless asked, filter, order
 * newest first (then by run id, descending, so the order is total), and cut
 * one page starting after `options.after`.
 */
export function selectRuns(runs: readonly ListedRun[], options: ListOptions = {}): ListedRun[] {
  const filtered = options.state !== undefined || options.outcome !== undefined || options.name !== undefined || options.since !== undefined;
  const since = options.since === undefined ? undefined : Date.parse(options.since);
  const kept = runs.filter((run) => {
    if (!('state' in run)) return !filtered;
    if (run.parentRunId !== undefined && options.includeChildren !== true) return false;
    if (options.state !== undefined && !options.state.includes(run.state)) return false;
    if (options.outcome !== undefined && !options.outcome.includes(run.outcome)) return false;
    if (options.name !== undefined && run.name !== options.name) return false;
    if (since !== undefined && Date.parse(run.updatedAt) < since) return false;
    return true;
  });
  kept.sort(newestFirst);
  let start = 0;
  if (options.after !== undefined) {
    const cursor = decodeCursor(options.after);
    // The first run ordered after the cursor's: correct even when the cursor's run was deleted since.
    const idx = kept.findIndex((r) => newestFirst(r, cursor) > 0);
    start = idx < 0 ? kept.length : idx;
  }
  const end = options.limit === undefined ? kept.length : start + options.limit;
  return kept.slice(start, end);
}

/** The cursor that continues a listing after `run` (pass it as `after`). */
export function cursorOf(run: ListedRun): string {
  return Buffer.from(JSON.stringify([createdOf(run), run.runId])).toString('base64url');
}

/**
 * @throws {RunwardenError} `OPTION_INVALID` (field `after`) for a cursor no listing produced.
 */
function decodeCursor(after: string): ListedRun {
  try {
    const [createdAt, runId] = JSON.parse(Buffer.from(after, 'base64url').toString('utf8')) as unknown[];
    if (typeof createdAt === 'string' && typeof runId === 'string') return createdAt === '' ? { runId, unreadable: '' } : ({ runId, createdAt } as ListedRun);
  } catch {
    // fall through
  }
  throw new RunwardenError('OPTION_INVALID', `after: not a cursor from a previous page: ${after}`, { field: 'after' });
}

function createdOf(run: ListedRun): string {
  return 'createdAt' in run ? run.createdAt : '';
}

function newestFirst(a: ListedRun, b: ListedRun): number {
  const ca = createdOf(a);
  const cb = createdOf(b);
  if (ca !== cb) return ca < cb ? 1 : -1;
  return a.runId < b.runId ? 1 : a.runId > b.runId ? -1 : 0;
}
