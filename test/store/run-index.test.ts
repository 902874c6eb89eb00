import { appendFileSync, existsSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import type { RunEvent, RunState } from '../../src/protocol/events.js';
import { applyEvents, createRecord, type RunRecord } from '../../src/protocol/record.js';
import { parseWorkflowSpec } from '../../src/protocol/spec.js';
import { FileRunStore } from '../../src/store/file/file-run-store.js';
import { currentOwner } from '../../src/store/liveness.js';
import { cursorOf } from '../../src/store/run-query.js';
import type { ListedRun, RunGuard } from '../../src/store/run-store.js';
import { ROOT, tempDir } from '../helpers/cli.js';

const owner = currentOwner('owner-index');

function specNamed(name: string) {
  return parseWorkflowSpec({ name, cwd: '/', nodes: [{ id: 'a', kind: 'command', cmd: 'true' }] });
}

async function create(store: FileRunStore, runId: string, name = 'indexed'): Promise<{ guard: RunGuard; record: RunRecord }> {
  const spec = specNamed(name);
  return store.create({
    runId,
    spec,
    owner,
    build: (incarnationId) => {
      const first: RunEvent = { seq: 1, ts: new Date().toISOString(), type: 'run_created', runId, name, incarnationId, cwd: '/', depth: 0, nodes: ['a'], first: 'a', secrets: [] };
      return { events: [first], record: createRecord(spec, first) };
    },
  });
}

/** Commit a state change the way the kernel does: an event, and the record after it. */
async function commitState(store: FileRunStore, guard: RunGuard, record: RunRecord, state: RunState): Promise<RunRecord> {
  const events: RunEvent[] = [{ seq: record.seq + 1, ts: new Date().toISOString(), type: 'log', level: 'info', message: `to ${state}` }];
  const next = { ...applyEvents(record, events), state };
  expect(await store.commit(guard, { events, record: next })).toBe('committed');
  return next;
}

const ids = (runs: ListedRun[]): string[] => runs.map((r) => r.runId);
const indexFile = (home: string): string => join(home, 'index', 'runs.jsonl');

describe('FileRunStore: the run index', () => {
  it('answers from the index, and a deleted or damaged index is rebuilt from the run directories', async () => {
    const home = tempDir();
    const store = new FileRunStore({ home });
    const a = await create(store, 'idx-a');
    await create(store, 'idx-b');
    await commitState(store, a.guard, a.record, 'failed');
    const first = await store.list();
    expect(first.find((r) => r.runId === 'idx-a')).toMatchObject({ state: 'failed' });
    expect(readFileSync(indexFile(home), 'utf8').trim().split('\n').length).toBeGreaterThanOrEqual(3);

    rmSync(indexFile(home));
    expect(await store.list()).toEqual(first);
    // Rebuilt: one line per run now.
    expect(readFileSync(indexFile(home), 'utf8').trim().split('\n')).toHaveLength(2);

    writeFileSync(indexFile(home), '{"runId":"idx-a","state":"comple'); // torn, and no newline
    appendFileSync(indexFile(home), '\nnot json at all\n{"runId":"ghost","name":"x","state":"running","stamp":"1:2:3"}\n');
    expect(await store.list()).toEqual(first); // the ghost has no directory: it is not listed
  });

  it('re-reads a run whose commit landed but whose index line did not (crash after apply)', async () => {
    const home = tempDir();
    const store = new FileRunStore({ home });
    const { guard } = await create(store, 'crashy');
    await store.release(guard);
    const before = (await store.list())[0]!;
    await new Promise((r) => setTimeout(r, 10));
    const crashed = await execa(process.execPath, [join(ROOT, 'test/fixtures/store-commit-crash.mjs'), home, 'crashy'], { reject: false, env: { RUNWARDEN_FAILPOINTS: 'commit.after-apply' } });
    expect(crashed.signal).toBe('SIGKILL');
    const after = (await new FileRunStore({ home }).list())[0]!;
    const loaded = await store.load('crashy');
    expect(after).toMatchObject({ runId: 'crashy', updatedAt: loaded?.record.updatedAt });
    expect(after).not.toEqual(before);
  });

  it('sees a batch published but not applied before a crash', async () => {
    const home = tempDir();
    const store = new FileRunStore({ home });
    const { guard } = await create(store, 'pub');
    await store.release(guard);
    await store.list();
    const crashed = await execa(process.execPath, [join(ROOT, 'test/fixtures/store-commit-crash.mjs'), home, 'pub'], { reject: false, env: { RUNWARDEN_FAILPOINTS: 'commit.after-publish' } });
    expect(crashed.signal).toBe('SIGKILL');
    expect(existsSync(join(home, 'runs', 'pub', '.tx'))).toBe(true);
    const listed = (await store.list())[0]!;
    expect(listed).toMatchObject({ updatedAt: (await store.load('pub'))?.record.updatedAt });
  });

  it('filters by state, outcome, name and since, and pages with a cursor', async () => {
    const store = new FileRunStore({ home: tempDir() });
    const made: string[] = [];
    for (let i = 0; i < 7; i++) {
      const runId = `page-${i}`;
      const run = await create(store, runId, i % 2 === 0 ? 'even' : 'odd');
      if (i < 3) await commitState(store, run.guard, run.record, 'completed');
      made.push(runId);
      await new Promise((r) => setTimeout(r, 3));
    }
    const newestFirst = [...made].reverse();
    expect(ids(await store.list())).toEqual(newestFirst);
    expect(ids(await store.list({ state: ['completed'] }))).toEqual(['page-2', 'page-1', 'page-0']);
    expect(ids(await store.list({ name: 'odd', state: ['pending'] }))).toEqual(['page-5', 'page-3']);
    expect(ids(await store.list({ outcome: ['verified'] }))).toEqual([]);
    const cut = (await store.list()).find((r) => r.runId === 'page-4') as { updatedAt: string };
    expect(ids(await store.list({ since: cut.updatedAt }))).toEqual(['page-6', 'page-5', 'page-4']);

    const pages: string[][] = [];
    let after: string | undefined;
    for (;;) {
      const page = await store.list({ limit: 3, ...(after === undefined ? {} : { after }) });
      if (page.length === 0) break;
      pages.push(ids(page));
      after = cursorOf(page[page.length - 1]!);
    }
    expect(pages).toEqual([newestFirst.slice(0, 3), newestFirst.slice(3, 6), newestFirst.slice(6)]);

    // The cursor's own run deleted between pages: the next page still starts right after it.
    const firstPage = await store.list({ limit: 2 });
    const taken = await store.acquire('page-5', owner);
    if (taken.status !== 'acquired') throw new Error(taken.status);
    expect(await store.delete(taken.guard)).toBe('committed');
    expect(ids(await store.list({ after: cursorOf(firstPage[1]!) }))).toEqual(newestFirst.slice(2));
    await expect(store.list({ after: 'garbage' })).rejects.toMatchObject({ code: 'OPTION_INVALID', field: 'after' });
  });

  it('compacts a long index to one line per run without changing the answer', async () => {
    const home = tempDir();
    const store = new FileRunStore({ home });
    const a = await create(store, 'busy');
    await create(store, 'quiet');
    let record = a.record;
    for (let i = 0; i < 1100; i++) record = await commitState(store, a.guard, record, i % 2 === 0 ? 'running' : 'awaiting_human');
    const sizeBefore = statSync(indexFile(home)).size;
    const listed = await store.list();
    expect(statSync(indexFile(home)).size).toBeLessThan(sizeBefore / 100);
    expect(await store.list()).toEqual(listed);
    expect(listed.find((r) => r.runId === 'busy')).toMatchObject({ state: 'awaiting_human' });
  });
});
