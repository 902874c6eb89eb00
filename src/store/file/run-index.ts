/**
 * The run index: what `list` reads instead of every run's `run.json`.
 *
 * An append-only JSONL file (`<home>/index/runs.jsonl`): one summary line per
 * commit that changes a run's summary, and a tombstone when a run is deleted;
 * the last line of a run wins. Each line carries the `stamp` (mtime and size)
 * of the `run.json` it summarizes, so a reader can tell a current line from a
 * stale one with one `stat` and re-read only the runs whose checkpoint moved
 * since (a crash between a commit and its append, a batch applied by another
 * process). Appends are single `O_APPEND` writes, so processes sharing the
 * store never interleave lines. When the file holds far more lines than runs,
 * it is compacted (rewritten and renamed, under a lock).
 *
 * The index is a cache: the run directories stay the truth, a missing or
 * damaged index is rebuilt from them by the next `list`, and a failed append
 * never fails the commit it follows.
 */
import { randomBytes } from 'node:crypto';
import { appendFile, mkdir, readFile, rename, stat, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import lockfile from 'proper-lockfile';
import type { RunSummary } from '../run-store.js';
import { isErrno } from './fsx.js';

/** A summary as indexed: with the stamp of the `run.json` it was taken from. */
export type IndexedSummary = RunSummary & { stamp: string };

type Line = IndexedSummary | { runId: string; deleted: true };

/** Compact once the file holds this many lines and more than four per live run. */
const COMPACT_MIN_LINES = 1000;

export class RunIndex {
  readonly #dir: string;
  readonly #file: string;

  constructor(home: string) {
    this.#dir = join(home, 'index');
    this.#file = join(this.#dir, 'runs.jsonl');
  }

  /** Record a run's summary. Best effort: a failure leaves the index stale, never the run. */
  async put(summary: IndexedSummary): Promise<void> {
    await this.#append([summary]);
  }

  /** Record several summaries in one append (a rebuild). */
  async putMany(summaries: IndexedSummary[]): Promise<void> {
    if (summaries.length > 0) await this.#append(summaries);
  }

  /** Record that a run is gone. */
  async remove(runId: string): Promise<void> {
    await this.#append([{ runId, deleted: true }]);
  }

  async #append(lines: Line[]): Promise<void> {
    const text = lines.map((l) => `${JSON.stringify(l)}\n`).join('');
    try {
      await appendFile(this.#file, text);
    } catch (err) {
      if (!isErrno(err, 'ENOENT')) return;
      await mkdir(this.#dir, { recursive: true }).catch(() => undefined);
      await appendFile(this.#file, text).catch(() => undefined);
    }
  }

  /** Every run's latest line, how many lines the file holds, and its size in bytes. */
  async read(): Promise<{ runs: Map<string, IndexedSummary>; lines: number; bytes: number }> {
    let buf: Buffer;
    try {
      buf = await readFile(this.#file);
    } catch (err) {
      if (isErrno(err, 'ENOENT')) return { runs: new Map(), lines: 0, bytes: 0 };
      throw err;
    }
    const text = buf.toString('utf8');
    const runs = new Map<string, IndexedSummary>();
    let lines = 0;
    let start = 0;
    for (let end = text.indexOf('\n'); end >= 0; end = text.indexOf('\n', start)) {
      const raw = text.slice(start, end);
      start = end + 1;
      lines += 1;
      let line: Line;
      try {
        line = JSON.parse(raw) as Line;
      } catch {
        continue; // a torn line from a crashed writer: the run is re-read from its directory
      }
      if (typeof line !== 'object' || line === null || typeof line.runId !== 'string') continue;
      if ('deleted' in line) runs.delete(line.runId);
      else if (typeof line.stamp === 'string') runs.set(line.runId, line);
    }
    return { runs, lines, bytes: buf.length };
  }

  /**
   * Rewrite the file with one line per run when it has grown past four lines per run.
   * Skipped when another process holds the compaction lock, and abandoned when
   * anything was appended after `bytes` (that line would be lost by the swap).
   * A line appended in the instant between that check and the rename is lost
   * all the same; the cost is one re-read of that run by the next `list`.
   * @returns whether the file was rewritten.
   */
  async maybeCompact(live: Map<string, IndexedSummary>, lines: number, bytes: number): Promise<boolean> {
    if (lines < COMPACT_MIN_LINES || lines < live.size * 4) return false;
    let release: (() => Promise<void>) | undefined;
    try {
      release = await lockfile.lock(this.#file, { realpath: false, retries: 0, stale: 10_000 });
    } catch {
      return false;
    }
    const tmp = `${this.#file}.${randomBytes(4).toString('hex')}.tmp`;
    try {
      await writeFile(tmp, [...live.values()].map((s) => `${JSON.stringify(s)}\n`).join(''));
      if ((await stat(this.#file)).size !== bytes) {
        await unlink(tmp);
        return false;
      }
      await rename(tmp, this.#file);
      return true;
    } catch {
      await unlink(tmp).catch(() => undefined);
      return false;
    } finally {
      await release?.().catch(() => undefined);
    }
  }
}

/** The stamp of a `run.json`: changes whenever the file is replaced. */
export function stampOf(st: { mtimeMs: number; size: number; ino: number }): string {
  return `${st.ino}:${st.mtimeMs}:${st.size}`;
}
