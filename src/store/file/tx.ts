/**
 * The commit protocol of the file store. All of it runs under the run lock.
 *
 * 1. **Stage** the batch in `.tx.staging/`: `manifest.json` (the events as
 *    JSONL, the record after them, the length `events.jsonl` had before, the
 *    artifact keys) and one file per artifact; fsync each, then the directory.
 * 2. **Publish**: rename `.tx.staging/` to `.tx/` and fsync the run directory.
 *    This rename is the commit point: from here the batch is authoritative.
 * 3. **Apply**, idempotently: move the artifacts into place (a missing source
 *    means already moved), truncate `events.jsonl` to the recorded length and
 *    write the events there, fsync it and the artifact directories, replace
 *    `run.json`; then move `.tx/` aside and remove it.
 *
 * A crash before step 2 leaves only staging debris (removed by the next
 * writer); a crash after it leaves `.tx/`, which the next lock holder applies
 * before anything else. Re-applying never duplicates an event.
 *
 * `run.json` is a checkpoint derived from the events, so it is replaced
 * without an fsync: if power loss rolls it back, readers fold the newer events
 * onto it (it records how many bytes of the log it covers).
 */
import { mkdir, open, readFile, rename, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { RunRecord } from '../../protocol/record.js';
import { failpoint } from '../../util/failpoints.js';
import type { CommitBatch } from '../run-store.js';
import { eventLines } from './events-log.js';
import { fsyncDir, isErrno, removeTree, writeAll, writeFileAtomic, writeFileDurable } from './fsx.js';

export const TX_DIR = '.tx';
export const STAGING_DIR = '.tx.staging';

/** What `run.json` holds: the record and how much of the event log it covers. */
export interface Checkpoint {
  v: 1;
  /** Bytes of `events.jsonl` folded into `record`. */
  eventsBytes: number;
  record: RunRecord;
}

interface Manifest {
  v: 1;
  /** Length of `events.jsonl` before this batch. */
  eventsOffset: number;
  events: string;
  record: RunRecord;
  artifacts: Array<{ key: string; file: string }>;
}

/**
 * Stage and publish a batch. Returns once the batch is durable under `.tx/`.
 * `onPublished` runs the moment the publishing rename succeeds: from then on
 * the batch counts as committed even if a later step fails.
 */
export async function stageAndPublish(runDir: string, batch: CommitBatch, onPublished: () => void): Promise<void> {
  failpoint('commit.before-stage');
  const staging = join(runDir, STAGING_DIR);
  await rm(staging, { recursive: true, force: true });
  await mkdir(staging);
  const eventsOffset = await sizeOf(join(runDir, 'events.jsonl'));
  const artifacts = (batch.artifacts ?? []).map((a, i) => ({ key: a.key, file: `a${i}`, data: a.data }));
  for (const a of artifacts) await writeFileDurable(join(staging, a.file), a.data);
  const manifest: Manifest = {
    v: 1,
    eventsOffset,
    events: eventLines(batch.events),
    record: batch.record,
    artifacts: artifacts.map(({ key, file }) => ({ key, file })),
  };
  await writeFileDurable(join(staging, 'manifest.json'), JSON.stringify(manifest));
  await fsyncDir(staging);
  failpoint('commit.after-stage');
  await rename(staging, join(runDir, TX_DIR));
  onPublished();
  await fsyncDir(runDir);
}

/** The record of a published-but-unapplied batch, if there is one (readers use it when they cannot take the lock). */
export async function pendingRecord(runDir: string): Promise<RunRecord | undefined> {
  try {
    const manifest = JSON.parse(await readFile(join(runDir, TX_DIR, 'manifest.json'), 'utf8')) as Manifest;
    return manifest.record;
  } catch {
    return undefined;
  }
}

/** Whether a published batch waits to be applied. */
export async function hasPendingTx(runDir: string): Promise<boolean> {
  try {
    await stat(join(runDir, TX_DIR));
    return true;
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return false;
    throw err;
  }
}

/** Apply the published batch in `.tx/`, if any, and remove it. Idempotent. */
export async function applyPending(runDir: string): Promise<boolean> {
  const tx = join(runDir, TX_DIR);
  let manifest: Manifest;
  try {
    manifest = JSON.parse(await readFile(join(tx, 'manifest.json'), 'utf8')) as Manifest;
  } catch (err) {
    if (isErrno(err, 'ENOENT', 'ENOTDIR')) {
      // No batch, or only the shell of one whose removal was interrupted.
      await removeTree(tx);
      return false;
    }
    throw err;
  }
  const touchedDirs = new Set<string>();
  for (const a of manifest.artifacts) {
    const target = join(runDir, a.key);
    await mkdir(dirname(target), { recursive: true });
    try {
      await rename(join(tx, a.file), target);
    } catch (err) {
      if (!isErrno(err, 'ENOENT')) throw err; // already moved by an earlier apply
    }
    touchedDirs.add(dirname(target));
  }
  failpoint('commit.mid-apply');
  const eventsPath = join(runDir, 'events.jsonl');
  const fh = await open(eventsPath, 'r+');
  let eventsBytes: number;
  try {
    const { size } = await fh.stat();
    const at = Math.min(size, manifest.eventsOffset);
    if (size > at) await fh.truncate(at);
    const data = Buffer.from(manifest.events, 'utf8');
    await writeAll(fh, data, at);
    await fh.sync();
    eventsBytes = at + data.length;
  } finally {
    await fh.close();
  }
  for (const dir of touchedDirs) await fsyncDir(dir);
  const checkpoint: Checkpoint = { v: 1, eventsBytes, record: manifest.record };
  await writeFileAtomic(join(runDir, 'run.json'), JSON.stringify(checkpoint), { durable: false });
  failpoint('commit.after-apply');
  await removeTree(tx);
  return true;
}

async function sizeOf(path: string): Promise<number> {
  try {
    return (await stat(path)).size;
  } catch (err) {
    if (isErrno(err, 'ENOENT')) return 0;
    throw err;
  }
}
