import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Host } from '../../src/host/host.js';
import { ROOT, assertConsistent, cli, makeHome, readCheckpoint, readEvents, spawnCli, tempDir, waitFor, writeSpec } from '../helpers/cli.js';

const SCRIPTS = join(ROOT, 'test/fixtures/scripts');
const script = (id: string, file: string, extra: Record<string, unknown> = {}) => ({ id, kind: 'script', module: join(SCRIPTS, file), ...extra });

describe('script nodes', () => {
  for (const isolation of ['thread', 'process'] as const) {
    it(`runs a module function in a ${isolation} with its context; its JSON return value is the output`, async () => {
      const home = makeHome();
      const dir = tempDir();
      const spec = writeSpec(dir, { name: 'scripted', cwd: dir, nodes: [script('echo', 'echo.mjs', { isolation, input: { n: 42, words: ['a', 'b'] } })] });
      const result = await cli(home, ['run', spec, '--id', 'sc', '--wait']);
      expect(result.exitCode, result.stdout + result.stderr).toBe(0);
      const record = readCheckpoint(home, 'sc');
      const attempt = record.nodes.echo!.attempts[0]!;
      expect(attempt.isolation).toBe(isolation);
      const output = JSON.parse(attempt.output!.preview) as { input: unknown; cwd: string; attempt: number; pid: number; threadId: number };
      expect(output).toMatchObject({ input: { n: 42, words: ['a', 'b'] }, cwd: dir, attempt: 1 });
      if (isolation === 'thread') expect(output.threadId).toBeGreaterThan(0);
      else expect(output.threadId).toBe(0);
      expect(record.usage).toMatchObject({ tokensIn: 10, tokensOut: 5, costUsd: 0.25 });
      assertConsistent(home, 'sc');
    });
  }

  it('a script that throws, is missing, or returns something that is not JSON fails clearly', async () => {
    const home = makeHome();
    const dir = tempDir();
    const cases: Array<[string, Record<string, unknown>, RegExp]> = [
      ['throws', script('x', 'echo.mjs', { export: 'fails' }), /fails\(\) threw: this script fails on purpose/],
      ['missing export', script('x', 'echo.mjs', { export: 'nope' }), /has no function export 'nope'/],
      ['not json', script('x', 'echo.mjs', { export: 'notJson' }), /returned a value that is not JSON/],
    ];
    for (const [name, node, message] of cases) {
      const spec = writeSpec(dir, { name, cwd: dir, nodes: [node] }, `${name}.json`);
      expect((await cli(home, ['run', spec, '--id', name.replace(' ', '-'), '--wait'])).exitCode).toBe(1);
      expect(readCheckpoint(home, name.replace(' ', '-')).error).toMatchObject({ code: 'SCRIPT_FAILED', message: expect.stringMatching(message) });
    }
    const missing = await cli(home, ['run', writeSpec(dir, { name: 'gone', nodes: [script('x', 'no-such-file.mjs')] }, 'gone.json'), '--wait']);
    expect(missing.exitCode).toBe(2);
    expect(missing.stderr).toMatch(/nodes\[0\]\.module: cannot find .*no-such-file\.mjs/);
  });

  for (const isolation of ['thread', 'process'] as const) {
    it(`a script that ignores its signal is terminated after the grace (${isolation})`, async () => {
      const home = makeHome({ killGraceMs: 300 });
      const dir = tempDir();
      const spec = writeSpec(dir, { name: 'stubborn', cwd: dir, nodes: [script('s', 'stubborn.mjs', { isolation, timeoutMs: 500 })] });
      const result = await cli(home, ['run', spec, '--id', 'st', '--wait']);
      expect(result.exitCode).toBe(1);
      expect(readCheckpoint(home, 'st').error).toMatchObject({ code: 'TIMEOUT' });
      const cancelled = spawnCli(home, ['run', writeSpec(dir, { name: 'stubborn', cwd: dir, nodes: [script('s', 'stubborn.mjs', { isolation })] }, 'c.json'), '--id', 'sc2', '--wait']);
      await waitFor(() => readEvents(home, 'sc2').some((e) => e.type === 'node_started'), 'the script');
      expect((await cli(home, ['cancel', 'sc2'])).exitCode).toBe(0);
      expect((await cancelled).exitCode).toBe(1);
      expect(readCheckpoint(home, 'sc2').state).toBe('cancelled');
    });
  }
});

describe('a thread that throws uncaught', () => {
  it('is replaced, and its claim re-queued within maxRequeues, then failed', async () => {
    const home = makeHome({ maxRequeues: 1 });
    const dir = tempDir();
    const spec = writeSpec(dir, { name: 'crashing-thread', cwd: dir, nodes: [script('boom', 'echo.mjs', { export: 'crashesThread' }), { id: 'after', kind: 'command', cmd: 'true' }] });
    const result = await cli(home, ['run', spec, '--id', 'ct', '--wait']);
    expect(result.exitCode).toBe(1);
    const record = readCheckpoint(home, 'ct');
    expect(record.nodes.boom!.attempts.map((a) => [a.isolation, a.state, a.error?.code])).toEqual([
      ['thread', 'lost', 'WORKER_LOST'],
      ['thread', 'failed', 'REQUEUE_LIMIT'],
    ]);
    expect(record.nodes.boom!.attempts[0]!.error!.message).toContain('uncaught in the worker');
    assertConsistent(home, 'ct');
  });
});

describe('warm workers', () => {
  it('200 short scripts in threads and 50 in processes start far fewer workers than executions', async () => {
    const host = await Host.open({ home: makeHome(), logger: false, workerIdleMs: 30_000, maxThreads: 2 });
    try {
      const dir = tempDir();
      const loop = (isolation: 'thread' | 'process', n: number) => ({
        name: `warm-${isolation}`,
        cwd: dir,
        maxNodeVisits: n + 1,
        nodes: [script('s', 'echo.mjs', { isolation, export: 'noop' }), { id: 'again', kind: 'router', routes: [{ when: { type: 'visits_lt', node: 's', n }, to: 's' }] }],
      });
      const threads = await host.start({ spec: loop('thread', 200) });
      const processes = await host.start({ spec: loop('process', 50) });
      const [t, p] = await Promise.all([threads.done, processes.done]);
      expect(t.record).toMatchObject({ state: 'completed' });
      expect(p.record).toMatchObject({ state: 'completed' });
      expect(t.record.usage.executions).toBe(200);
      expect(p.record.usage.executions).toBe(50);
      const stats = host.poolStats();
      expect(stats.thread.workersStarted).toBeGreaterThan(0);
      expect(stats.thread.workersStarted).toBeLessThanOrEqual(4);
      expect(stats.process.workersStarted).toBeGreaterThan(0);
      expect(stats.process.workersStarted).toBeLessThanOrEqual(2);
    } finally {
      await host.close();
    }
  });
});
