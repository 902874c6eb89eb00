import { cpSync, mkdirSync, readFileSync, readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Host } from '../../src/host/host.js';
import type { RunEvent } from '../../src/protocol/events.js';
import { assertConsistent, cli, makeHome, readEvents, runDir, tempDir, waitFor } from '../helpers/cli.js';
import { startDaemon, type TestDaemon } from '../helpers/daemon.js';

type Listed = { runs: Array<{ runId: string; state: string }>; next: string | null };

async function states(d: TestDaemon, query = ''): Promise<Listed['runs']> {
  const all: Listed['runs'] = [];
  let after = '';
  for (;;) {
    const page = (await d.api<Listed>('GET', `/runs?limit=1000${query}${after}`)).body;
    all.push(...page.runs);
    if (page.next === null) return all;
    after = `&after=${page.next}`;
  }
}

describe('fleets', () => {
  it('100 concurrent runs in one daemon under maxConcurrent 3: all park at their gates, then share the slots fairly and all complete', async () => {
    const home = makeHome({ maxConcurrent: 3, leaseRenewMs: 2000 });
    const dir = tempDir();
    const d = await startDaemon(home);
    try {
      const spec = (i: number) => ({
        name: `fleet-${i % 5}`,
        cwd: dir,
        nodes: [
          { id: 'review', kind: 'human_gate', prompt: 'start?' },
          { id: 'a', kind: 'command', cmd: 'sh', args: ['-c', 'sleep 0.02'] },
          { id: 'b', kind: 'command', cmd: 'sh', args: ['-c', 'sleep 0.02'] },
          { id: 'c', kind: 'command', cmd: 'true' },
        ],
      });
      const ids: string[] = [];
      for (let i = 0; i < 100; i++) {
        const r = await d.api<{ runId: string }>('POST', '/runs', { spec: spec(i), runId: `fleet-${String(i).padStart(3, '0')}` });
        expect(r.status).toBe(201);
        ids.push(r.body.runId);
      }
      await waitFor(async () => (await states(d, '&state=awaiting_human')).length === 100, 'all 100 runs to park at their gates', 120_000);
      const health = (await d.api<{ driving: string[]; executions: { running: number; queued: number } }>('GET', '/health')).body;
      expect(health.driving).toHaveLength(100);
      expect(health.executions).toEqual({ running: 0, queued: 0 });

      // Three blockers hold every slot while the 100 runs are approved and queue their first node.
      for (let i = 0; i < 3; i++) {
        await d.api('POST', '/runs', { spec: { name: 'blocker', cwd: dir, nodes: [{ id: 'hold', kind: 'command', cmd: 'sh', args: ['-c', 'while [ ! -e go ]; do sleep 0.02; done'] }] } });
      }
      await waitFor(async () => (await d.api<{ executions: { running: number } }>('GET', '/health')).body.executions.running === 3, 'the blockers to hold every slot');
      for (const runId of ids) expect((await d.api('POST', `/runs/${runId}/approve`, { waitMs: 0 })).status).toBe(200);
      await waitFor(async () => (await d.api<{ executions: { queued: number } }>('GET', '/health')).body.executions.queued === 100, 'all 100 first nodes to queue');
      writeFileSync(join(dir, 'go'), '');
      await waitFor(async () => (await states(d, '&state=completed&name=fleet-0')).length === 20 && (await states(d, '&state=completed')).length === 103, 'every run to complete', 120_000);

      // No starvation: every run's first node started before any run's last node — the slots went round the runs.
      const started = (ev: RunEvent[], node: string): number => Date.parse(ev.find((e) => e.type === 'node_started' && e.node === node)!.ts);
      const events = ids.map((id) => readEvents(home, id));
      expect(Math.max(...events.map((ev) => started(ev, 'a')))).toBeLessThanOrEqual(Math.min(...events.map((ev) => started(ev, 'c'))));
      for (const id of ids.slice(0, 10)) assertConsistent(home, id);
    } finally {
      await d.stop();
    }
  }, 240_000);

  it('list over 5,000 runs answers from the index: run.json files are not read', async () => {
    const home = makeHome();
    const host = await Host.open({ home, logger: false });
    const seed = await host.start({ spec: { name: 'seed', cwd: tempDir(), nodes: [{ id: 'a', kind: 'command', cmd: 'true' }] }, runId: 'seed' });
    await seed.done;
    await host.close();
    // Clone the seed run 5,000 times (each clone a consistent run with its own id).
    const seedDir = runDir(home, 'seed');
    const checkpoint = readFileSync(join(seedDir, 'run.json'), 'utf8');
    const events = readFileSync(join(seedDir, 'events.jsonl'), 'utf8');
    for (let i = 0; i < 5000; i++) {
      const runId = `clone-${String(i).padStart(5, '0')}`;
      const target = runDir(home, runId);
      cpSync(seedDir, target, { recursive: true });
      writeFileSync(join(target, 'run.json'), checkpoint.replaceAll('"seed"', `"${runId}"`));
      writeFileSync(join(target, 'events.jsonl'), events.replaceAll('"seed"', `"${runId}"`).replace(/"runId":"[^"]*"/, `"runId":"${runId}"`));
    }
    const first = await cli(home, ['list', '--json', '--limit', '5000', '--no-daemon'], { timeoutMs: 120_000 });
    expect(first.exitCode, first.stderr).toBe(0);
    const listed = (JSON.parse(first.stdout) as Listed).runs;
    expect(listed).toHaveLength(5000);
    expect(listed.every((r) => r.state === 'completed')).toBe(true);

    // Garble every clone's run.json, keeping its size and mtime: a list that read them would report them unreadable.
    for (const name of readdirSync(join(home, 'runs')).filter((n) => n.startsWith('clone-'))) {
      const path = join(runDir(home, name), 'run.json');
      const st = statSync(path);
      writeFileSync(path, 'x'.repeat(st.size));
      utimesSync(path, st.atime, st.mtime);
    }
    const again = await cli(home, ['list', '--json', '--limit', '5000', '--state', 'completed'], { timeoutMs: 120_000 });
    expect(again.exitCode, again.stderr).toBe(0);
    expect((JSON.parse(again.stdout) as Listed).runs).toHaveLength(5000);
    const page = JSON.parse((await cli(home, ['list', '--json', '--limit', '10'])).stdout) as Listed;
    expect(page.runs).toHaveLength(10);
    expect(page.next).not.toBeNull();
  }, 180_000);

  it('two daemons on one store: each run executed by exactly one; when one is killed the other adopts and finishes its runs', async () => {
    const home = makeHome({ adoptScanMs: 300, maxConcurrent: 4 });
    const dir = tempDir();
    const marks = join(dir, 'marks');
    mkdirSync(marks);
    // Phase 1: 50 runs whose node waits for 'go', then records which daemon's worker ran it.
    const gate = (runId: string) => ({
      name: 'split',
      cwd: dir,
      nodes: [{ id: 'work', kind: 'command', cmd: 'sh', args: ['-c', `while [ ! -e go ]; do sleep 0.05; done; echo "$PPID" >> marks/${runId}`] }],
    });
    const starter = await startDaemon(home);
    for (let i = 0; i < 50; i++) expect((await starter.api('POST', '/runs', { spec: gate(`s${i}`), runId: `s${i}` })).status).toBe(201);
    // SIGTERM: every run interrupted and released, none executed (no 'go' yet).
    expect(await starter.stop()).toBe(0);
    expect(readdirSync(marks)).toEqual([]);

    // Two daemons start at once and race to adopt the 50 released runs.
    const [a, b] = await Promise.all([startDaemon(home), startDaemon(home)]);
    writeFileSync(join(dir, 'go'), '');
    try {
      await waitFor(async () => (await states(a, '&state=completed')).length === 50, 'all 50 runs to complete', 120_000);
      for (let i = 0; i < 50; i++) {
        const lines = readFileSync(join(marks, `s${i}`), 'utf8').trim().split('\n');
        expect(lines, `run s${i} executed ${lines.length} times`).toHaveLength(1);
        assertConsistent(home, `s${i}`);
      }

      // Phase 2: 20 slow runs on daemon a; kill a mid-way; b adopts and finishes them.
      const slow = () => ({ name: 'adopted', cwd: dir, nodes: [{ id: 'one', kind: 'command', cmd: 'sh', args: ['-c', 'sleep 0.3'] }, { id: 'two', kind: 'command', cmd: 'true' }] });
      for (let i = 0; i < 20; i++) expect((await a.api('POST', '/runs', { spec: slow(), runId: `k${i}` })).status).toBe(201);
      await waitFor(async () => (await states(a, '&name=adopted&state=completed')).length >= 2, 'some of them to finish on a');
      await a.kill();
      await waitFor(async () => (await states(b, '&name=adopted&state=completed')).length === 20, 'b to finish every run a held', 120_000);
      for (let i = 0; i < 20; i++) {
        const events = assertConsistent(home, `k${i}`);
        // Nothing that succeeded ran again: each node succeeded exactly once.
        expect(events.filter((e: RunEvent) => e.type === 'node_succeeded').map((e) => (e as { node: string }).node)).toEqual(['one', 'two']);
      }
    } finally {
      await Promise.allSettled([a.stop(), b.stop()]);
    }
  }, 240_000);
});
