import { existsSync, readFileSync, readdirSync, truncateSync, writeFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { open } from 'node:fs/promises';
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import type { RunEvent } from '../../src/protocol/events.js';
import { applyEvents, createRecord, type RunRecord } from '../../src/protocol/record.js';
import { parseWorkflowSpec } from '../../src/protocol/spec.js';
import { FileRunStore } from '../../src/store/file/file-run-store.js';
import { currentOwner } from '../../src/store/liveness.js';
import type { OwnerInfo, RunGuard, RunStore } from '../../src/store/run-store.js';
import { ROOT, readEvents, runDir, tempDir } from '../helpers/cli.js';

const spec = parseWorkflowSpec({ name: 'store-test', cwd: '/', nodes: [{ id: 'a', kind: 'command', cmd: 'true' }] });

async function createRun(store: RunStore, runId: string, owner: OwnerInfo): Promise<{ guard: RunGuard; record: RunRecord }> {
  return store.create({
    runId,
    spec,
    owner,
    build: (incarnationId) => {
      const first: RunEvent = { seq: 1, ts: new Date().toISOString(), type: 'run_created', runId, name: spec.name, incarnationId, cwd: '/', depth: 0, nodes: ['a'], first: 'a', secrets: [] };
      return { events: [first], record: createRecord(spec, first) };
    },
  });
}

function logEvent(record: RunRecord, message: string): { events: RunEvent[]; record: RunRecord } {
  const events: RunEvent[] = [{ seq: record.seq + 1, ts: new Date().toISOString(), type: 'log', level: 'info', message }];
  return { events, record: applyEvents(record, events) };
}

/**
 * The behaviour every RunStore must show. A database-backed store runs the
 * same function against its own factory.
 */
function runStoreConformance(name: string, makeStore: () => RunStore): void {
  describe(`${name}: RunStore conformance`, () => {
    const ownerA = currentOwner('owner-a');
    const ownerB = currentOwner('owner-b');

    it('creates a run exactly once and reads it back', async () => {
      const store = makeStore();
      const { record } = await createRun(store, 'r1', ownerA);
      const loaded = await store.load('r1');
      expect(loaded?.record).toEqual(record);
      expect(loaded?.spec).toEqual(spec);
      await expect(createRun(store, 'r1', ownerB)).rejects.toMatchObject({ code: 'RUN_EXISTS' });
      expect(await store.load('nope')).toBeUndefined();
    });

    it('lands batches under a current guard and refuses a superseded one', async () => {
      const store = makeStore();
      const { guard, record } = await createRun(store, 'r2', ownerA);
      const one = logEvent(record, 'one');
      expect(await store.commit(guard, one)).toBe('committed');
      // Re-acquiring, even by the same owner, kills the old guard.
      const again = await store.acquire('r2', ownerA);
      expect(again.status).toBe('acquired');
      if (again.status !== 'acquired') return;
      expect(again.guard.fence).toBeGreaterThan(guard.fence);
      expect(again.guard.acquisitionId).not.toBe(guard.acquisitionId);
      expect(await store.commit(guard, logEvent(one.record, 'stale'))).toBe('superseded');
      expect(await store.commit(again.guard, logEvent(one.record, 'two'))).toBe('committed');
      const events = await store.readEvents('r2');
      expect(events.map((e) => (e.type === 'log' ? e.message : e.type))).toEqual(['run_created', 'one', 'two']);
      expect(await store.readEvents('r2', 2)).toHaveLength(1);
    });

    it('refuses a second live owner by pid and host, and hands over after release', async () => {
      const store = makeStore();
      const { guard } = await createRun(store, 'r3', ownerA);
      const refused = await store.acquire('r3', ownerB);
      expect(refused).toMatchObject({ status: 'held', lease: { pid: process.pid, ownerId: 'owner-a' } });
      expect(await store.release(guard)).toBe('committed');
      const taken = await store.acquire('r3', ownerB);
      expect(taken.status).toBe('acquired');
      if (taken.status === 'acquired') expect(taken.guard.fence).toBe(guard.fence + 1);
      expect(await store.renew(guard)).toBe('superseded');
    });

    it('takes over a lease whose holder process is dead', async () => {
      const store = makeStore();
      const dead = { ...ownerA, ownerId: 'owner-dead', pid: 2 ** 22 + 12345 };
      await createRun(store, 'r4', dead);
      const taken = await store.acquire('r4', ownerB);
      expect(taken.status).toBe('acquired');
    });

    it('starts a new incarnation when a deleted id is reused, so old guards stay dead', async () => {
      const store = makeStore();
      const first = await createRun(store, 'r5', ownerA);
      expect(await store.delete(first.guard)).toBe('committed');
      expect(await store.load('r5')).toBeUndefined();
      const second = await createRun(store, 'r5', ownerA);
      expect(second.guard.incarnationId).not.toBe(first.guard.incarnationId);
      expect(await store.commit(first.guard, logEvent(second.record, 'ghost'))).toBe('superseded');
      expect(await store.commit(second.guard, logEvent(second.record, 'real'))).toBe('committed');
    });

    it('queues control requests durably until removed', async () => {
      const store = makeStore();
      await createRun(store, 'r6', ownerA);
      await store.postControl('r6', { id: 'c1', action: 'steer', text: 'look left', at: new Date().toISOString(), from: { pid: 1, host: 'h' } });
      await store.postControl('r6', { id: 'c2', action: 'cancel', at: new Date().toISOString(), from: { pid: 1, host: 'h' } });
      expect((await store.pendingControls('r6')).map((c) => c.id)).toEqual(['c1', 'c2']);
      await store.removeControls('r6', ['c1']);
      expect((await store.pendingControls('r6')).map((c) => c.id)).toEqual(['c2']);
      await expect(store.postControl('missing', { id: 'c3', action: 'cancel', at: '', from: { pid: 1, host: 'h' } })).rejects.toMatchObject({ code: 'RUN_NOT_FOUND' });
    });

    it('lists runs newest first, children hidden unless asked', async () => {
      const store = makeStore();
      await createRun(store, 'older', ownerA);
      await new Promise((r) => setTimeout(r, 5));
      await createRun(store, 'newer', ownerA);
      expect((await store.list()).map((r) => r.runId)).toEqual(['newer', 'older']);
    });
  });
}

runStoreConformance('FileRunStore', () => new FileRunStore({ home: tempDir() }));

describe('FileRunStore: durability and recovery', () => {
  const owner = currentOwner('owner-t');

  it('rebuilds a truncated run.json from the events', async () => {
    const home = tempDir();
    const store = new FileRunStore({ home });
    const { guard, record } = await createRun(store, 'torn', owner);
    const batch = logEvent(record, 'kept');
    await store.commit(guard, batch);
    const path = join(runDir(home, 'torn'), 'run.json');
    truncateSync(path, Math.floor(statSync(path).size / 2));
    const loaded = await new FileRunStore({ home }).load('torn');
    expect(loaded?.record).toEqual(batch.record);
    writeFileSync(path, '');
    expect((await new FileRunStore({ home }).load('torn'))?.record).toEqual(batch.record);
  });

  it('drops a torn last event line, stays consistent, and continues from there', async () => {
    const home = tempDir();
    const store = new FileRunStore({ home });
    const { guard, record } = await createRun(store, 'tail', owner);
    const one = logEvent(record, 'one');
    await store.commit(guard, one);
    const two = logEvent(one.record, 'two');
    await store.commit(guard, two);
    const events = join(runDir(home, 'tail'), 'events.jsonl');
    await store.release(guard);
    truncateSync(events, statSync(events).size - 10); // tear the last line
    const reader = new FileRunStore({ home });
    expect((await reader.load('tail'))?.record).toEqual(one.record);
    expect(await reader.readEvents('tail')).toHaveLength(2);
    // The next owner repairs the tail and writes on from seq 3.
    const taken = await reader.acquire('tail', currentOwner('owner-next'));
    expect(taken.status).toBe('acquired');
    if (taken.status !== 'acquired') return;
    expect(taken.run.record).toEqual(one.record);
    const three = logEvent(taken.run.record, 'after repair');
    expect(await reader.commit(taken.guard, three)).toBe('committed');
    expect(readEvents(home, 'tail').map((e) => e.seq)).toEqual([1, 2, 3]);
    expect(readFileSync(events, 'utf8').endsWith('\n')).toBe(true);
  });

  for (const failpoint of ['commit.after-publish', 'commit.mid-apply', 'commit.after-apply']) {
    it(`finishes a batch published before a crash (${failpoint})`, async () => {
      const home = tempDir();
      const store = new FileRunStore({ home });
      const { guard } = await createRun(store, 'tx', owner);
      await store.release(guard);
      const crashed = await execa(process.execPath, [join(ROOT, 'test/fixtures/store-commit-crash.mjs'), home, 'tx'], { reject: false, env: { RUNWARDEN_FAILPOINTS: failpoint } });
      expect(crashed.signal).toBe('SIGKILL');
      if (failpoint !== 'commit.after-apply') expect(existsSync(join(runDir(home, 'tx'), '.tx'))).toBe(true);
      const loaded = await new FileRunStore({ home }).load('tx');
      expect(loaded?.record.seq).toBe(2);
      expect(readEvents(home, 'tx').map((e) => e.type)).toEqual(['run_created', 'log']);
      expect(readFileSync(join(runDir(home, 'tx'), 'nodes/a/a9/output.txt'), 'utf8')).toBe('artifact of the batch');
      expect(readdirSync(runDir(home, 'tx')).filter((n) => n.startsWith('.tx'))).toEqual([]);
    });
  }

  it('writes every byte when the disk takes short writes (write(2) may write less than asked)', async () => {
    const home = tempDir();
    const store = new FileRunStore({ home });
    const { guard, record } = await createRun(store, 'short', owner);
    // Fault injection: every write on a file handle takes at most 7 bytes, as a filling disk may.
    const probe = await open(join(home, 'probe'), 'w');
    const proto = Object.getPrototypeOf(probe) as { write: (...args: unknown[]) => Promise<{ bytesWritten: number }> };
    await probe.close();
    const original = proto.write;
    proto.write = function (this: unknown, data: unknown, offset: unknown, length: unknown, position: unknown) {
      if (data instanceof Uint8Array && typeof length === 'number') return original.call(this, data, offset, Math.min(length, 7), position);
      return original.call(this, data, offset, length, position);
    };
    try {
      let current = record;
      for (const message of ['one', 'two', 'three']) {
        const batch = logEvent(current, `a longer message so that the line takes many short writes: ${message}`);
        expect(await store.commit(guard, batch)).toBe('committed');
        current = batch.record;
      }
    } finally {
      proto.write = original;
    }
    expect(readEvents(home, 'short').map((e) => e.seq)).toEqual([1, 2, 3, 4]);
    await import('node:fs').then((fs) => fs.rmSync(join(runDir(home, 'short'), 'run.json')));
    expect((await new FileRunStore({ home }).load('short'))?.record.seq).toBe(4);
  });

  it('leaves nothing of a batch that crashed before publishing', async () => {
    const home = tempDir();
    const store = new FileRunStore({ home });
    const { guard } = await createRun(store, 'early', owner);
    await store.release(guard);
    const crashed = await execa(process.execPath, [join(ROOT, 'test/fixtures/store-commit-crash.mjs'), home, 'early'], { reject: false, env: { RUNWARDEN_FAILPOINTS: 'commit.after-stage' } });
    expect(crashed.signal).toBe('SIGKILL');
    const loaded = await new FileRunStore({ home }).load('early');
    expect(loaded?.record.seq).toBe(1);
    const taken = await new FileRunStore({ home }).acquire('early', owner);
    expect(taken.status).toBe('acquired');
    expect(readdirSync(runDir(home, 'early')).filter((n) => n.startsWith('.tx'))).toEqual([]);
    expect(readEvents(home, 'early')).toHaveLength(1);
  });

  it('lets exactly one of many processes create each run id', async () => {
    const home = tempDir();
    const rounds = 40;
    const racers = await Promise.all(
      ['p1', 'p2', 'p3', 'p4'].map((tag) => execa(process.execPath, [join(ROOT, 'test/fixtures/store-create-race.mjs'), home, String(rounds), tag], { reject: false })),
    );
    for (const r of racers) expect(r.exitCode, String(r.stderr)).toBe(0);
    const lines = racers.flatMap((r, i) => String(r.stdout).split('\n').filter(Boolean).map((l) => ({ tag: `p${i + 1}`, line: l })));
    const store = new FileRunStore({ home });
    for (let i = 0; i < rounds; i++) {
      const winners = lines.filter((l) => l.line === `race-${i} won`);
      expect(winners, `race-${i}`).toHaveLength(1);
      // The run executes under its creator's spec and no other.
      const loaded = await store.load(`race-${i}`);
      expect(loaded?.spec.name).toBe(`spec-of-${winners[0]!.tag}`);
      expect(loaded?.record.name).toBe(`spec-of-${winners[0]!.tag}`);
    }
  });
});
