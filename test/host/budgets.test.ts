import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Host } from '../../src/host/host.js';
import { isRunning } from '../../src/util/process-tree.js';
import { ROOT, assertConsistent, cli, makeHome, readCheckpoint, tempDir, writeSpec } from '../helpers/cli.js';

const SCRIPTS = join(ROOT, 'test/fixtures/scripts');
const read = (path: string): string => (existsSync(path) ? readFileSync(path, 'utf8').trim() : '');

describe('execution budgets', () => {
  for (const isolation of ['process', 'thread'] as const) {
    it(`a script allocating without end is stopped near its rssMb (${isolation}); the host and other runs go on`, async () => {
      const host = await Host.open({ home: makeHome(), logger: false, sampleMs: 100 });
      try {
        const dir = tempDir();
        const hog = await host.start({ spec: { name: 'hog', cwd: dir, nodes: [{ id: 'hog', kind: 'script', module: join(SCRIPTS, 'hog.mjs'), isolation, budget: { rssMb: 200 } }] } });
        const calm = await host.start({ spec: { name: 'calm', cwd: dir, nodes: [{ id: 'a', kind: 'command', cmd: 'sleep', args: ['0.5'] }, { id: 'b', kind: 'command', cmd: 'true' }] } });
        const [h, c] = await Promise.all([hog.done, calm.done]);
        expect(c.record.state).toBe('completed');
        expect(h.record).toMatchObject({ state: 'failed', error: { code: 'BUDGET_EXCEEDED', node: 'hog', detail: { limit: 'rssMb', limitValue: 200, scope: 'execution' } } });
        const measured = (h.record.error!.detail as { measured: number }).measured;
        expect(measured).toBeGreaterThanOrEqual(200);
        if (isolation === 'process') expect(measured).toBeLessThan(600); // stopped near the limit: one sample past it
        // A breach is not retried.
        expect(h.record.nodes.hog!.attempts).toHaveLength(1);
      } finally {
        await host.close();
      }
    });
  }

  it('a command spinning CPU is stopped at cpuMs, with every process of its tree', async () => {
    const home = makeHome({ sampleMs: 100 });
    const dir = tempDir();
    const script = `sleep 60 & echo $! >> "${dir}/pids"; sh -c 'while :; do :; done' & echo $! >> "${dir}/pids"; echo $$ >> "${dir}/pids"; wait`;
    const spec = writeSpec(dir, { name: 'spin', cwd: dir, nodes: [{ id: 'spin', kind: 'command', cmd: 'sh', args: ['-c', script], budget: { cpuMs: 800 }, retry: { max: 2, backoffMs: 0 } }] });
    const result = await cli(home, ['run', spec, '--id', 'spin', '--wait']);
    expect(result.exitCode).toBe(1);
    const record = readCheckpoint(home, 'spin');
    expect(record.error).toMatchObject({ code: 'BUDGET_EXCEEDED', detail: { limit: 'cpuMs', limitValue: 800 } });
    expect(record.nodes.spin!.attempts).toHaveLength(1); // not retried: it would breach again
    const measured = (record.error!.detail as { measured: number }).measured;
    expect(measured).toBeGreaterThan(800);
    expect(measured).toBeLessThan(3000);
    for (const pid of read(join(dir, 'pids')).split('\n').map(Number)) expect(isRunning(pid), `pid ${pid}`).toBe(false);
    assertConsistent(home, 'spin');
  });

  it('a command that sleeps is stopped at wallMs', async () => {
    const home = makeHome();
    const dir = tempDir();
    const spec = writeSpec(dir, { name: 'sleepy', cwd: dir, executionBudget: { wallMs: 400 }, nodes: [{ id: 'nap', kind: 'command', cmd: 'sleep', args: ['30'] }] });
    const result = await cli(home, ['run', spec, '--id', 'nap', '--wait']);
    expect(result.exitCode).toBe(1);
    expect(readCheckpoint(home, 'nap').error).toMatchObject({ code: 'BUDGET_EXCEEDED', detail: { limit: 'wallMs', limitValue: 400, scope: 'execution' } });
    const show = await cli(home, ['show', 'nap']);
    expect(show.stdout).toMatch(/budget\s+per execution: wallMs 400 ms/);
  });

  it('a run-level costUsd budget, hit across attempts with a host restart in between, fails the run at the right attempt', async () => {
    const home = makeHome();
    const dir = tempDir();
    const spend = (id: string, costUsd: number) => ({ id, kind: 'script', module: join(SCRIPTS, 'cost.mjs'), input: { costUsd, holdMs: 300 } });
    const spec = writeSpec(dir, { name: 'spender', cwd: dir, budget: { costUsd: 1 }, nodes: [spend('first', 0.6), spend('second', 0.3), spend('third', 0.3)] });
    const crashed = await cli(home, ['run', spec, '--id', 'cost', '--wait'], { env: { RUNWARDEN_FAILPOINTS: 'kernel.after-node-started:third' } });
    expect(crashed.exitCode).not.toBe(0);
    expect(readCheckpoint(home, 'cost').usage.costUsd).toBeCloseTo(0.9);
    const resumed = await cli(home, ['resume', 'cost', '--wait']);
    expect(resumed.exitCode).toBe(1);
    const record = readCheckpoint(home, 'cost');
    expect(record).toMatchObject({ state: 'failed', error: { code: 'BUDGET_EXCEEDED', node: 'third', detail: { limit: 'costUsd', limitValue: 1, scope: 'run' } } });
    // The attempt that crossed the line is the one after the restart; the one lost with the host cost nothing on record.
    expect(record.nodes.third!.attempts.map((a) => a.state)).toEqual(['lost', 'failed']);
    expect(record.usage.costUsd).toBeCloseTo(1.2);
    assertConsistent(home, 'cost');
    const show = await cli(home, ['show', 'cost']);
    expect(show.stdout).toMatch(/budget\s+run: costUsd \$1\.2000 of \$1\.0000 \(over\)/);
  });
});
