import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Host } from '../../src/host/host.js';
import { ROOT, assertConsistent, cli, makeHome, readCheckpoint, tempDir, writeSpec } from '../helpers/cli.js';

const SCRIPTS = join(ROOT, 'test/fixtures/scripts');
const script = (id: string, file: string, extra: Record<string, unknown> = {}) => ({ id, kind: 'script', module: join(SCRIPTS, file), ...extra });

/** A directory with a fake `git` that records it ran. */
function evilGit(): { dir: string; marker: string } {
  const dir = tempDir('rw-evil-');
  const marker = join(dir, 'EVIL-RAN');
  writeFileSync(join(dir, 'git'), `#!/bin/sh\necho evil > "${marker}"\n`);
  chmodSync(join(dir, 'git'), 0o755);
  return { dir, marker };
}

describe('regressions: a script cannot tamper with what runs after it', () => {
  it('a script that patches its warm worker cannot fake a later verdict, in its run or another', async () => {
    const host = await Host.open({ home: makeHome(), logger: false, workerIdleMs: 30_000 });
    try {
      const dir = tempDir();
      const tampering = {
        name: 'tamper',
        cwd: dir,
        policy: { childProcesses: true },
        contract: { checks: [{ type: 'command', id: 'always-red', cmd: 'false' }] },
        nodes: [script('prep', 'tamper.mjs', { isolation: 'process' }), { id: 'env', kind: 'command', cmd: 'sh', args: ['-c', 'echo "POISON=$POISON"'] }],
      };
      const a = await (await host.start({ spec: tampering })).done;
      expect(a.record).toMatchObject({ state: 'failed', outcome: 'refuted' });
      expect(readFileSync(host.store.locate(a.record.runId, a.record.nodes.env!.attempts[0]!.output!.artifact)!, 'utf8')).toBe('POISON=\n');
      const b = await (await host.start({ spec: { ...tampering, name: 'victim', nodes: [{ id: 'only', kind: 'command', cmd: 'sh', args: ['-c', 'echo "POISON=$POISON"'] }] } })).done;
      expect(b.record).toMatchObject({ state: 'failed', outcome: 'refuted' });
    } finally {
      await host.close();
    }
  });
});

describe('regressions: the policy ceiling cannot be lifted from a spec', () => {
  it('NODE_OPTIONS set by a spec cannot widen a script worker’s permissions', async () => {
    const dir = tempDir();
    const sandbox = join(dir, 'sandbox');
    mkdirSync(sandbox);
    const escaped = join(dir, 'ESCAPED.txt');
    const home = makeHome({ policy: { fs: { write: [sandbox] } } });
    const spec = writeSpec(dir, { name: 'lift', cwd: dir, policy: { env: { set: { NODE_OPTIONS: `--allow-fs-write=${escaped}` } } }, nodes: [script('w', 'writer.mjs', { input: { path: escaped } })] });
    const result = await cli(home, ['run', spec, '--id', 'lift', '--wait']);
    expect(result.exitCode).toBe(1);
    expect(readCheckpoint(home, 'lift').error).toMatchObject({ code: 'SCRIPT_FAILED', message: expect.stringContaining('ERR_ACCESS_DENIED') });
    expect(existsSync(escaped)).toBe(false);
  });

  it('variables a node gives its programs must be allowed by the env policy', async () => {
    const dir = tempDir();
    const home = makeHome({ policy: { env: { allow: ['PATH', 'HOME'] } } });
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ nodes: [{ id: 'a', kind: 'command', cmd: 'node', env: { NODE_OPTIONS: '--require /tmp/x.cjs' } }] }, /nodes\[0\]\.env\.NODE_OPTIONS: 'NODE_OPTIONS' may not be given to a program/],
      [{ contract: { checks: [{ type: 'command', cmd: 'true', env: { LD_PRELOAD: '/tmp/x.so' } }] }, nodes: [{ id: 'a', kind: 'command', cmd: 'true' }] }, /contract\.checks\[0\]\.env\.LD_PRELOAD/],
      [{ nodes: [{ id: 'g', kind: 'agent', prompt: 'p', engine: 'custom', customEngine: { bin: 'true', env: { API_KEY: 'k' } } }] }, /nodes\[0\]\.customEngine\.env\.API_KEY/],
    ];
    for (const [extra, message] of cases) {
      const result = await cli(home, ['run', writeSpec(dir, { name: 'env', cwd: dir, ...extra }), '--wait']);
      expect(result.exitCode, JSON.stringify(extra)).toBe(2);
      expect(result.stderr).toMatch(message);
    }
  });

  it('`commands` holds against a PATH set by the spec, a node env PATH, relative entries and unresolvable names', async () => {
    const dir = tempDir();
    const home = makeHome({ policy: { commands: ['git', 'sh'] } });
    const { dir: evil, marker } = evilGit();
    const evilPath = `${evil}:${process.env.PATH ?? ''}`;
    const runs: Array<[string, Record<string, unknown>]> = [
      ['node-path', { nodes: [{ id: 'a', kind: 'command', cmd: 'git', args: ['--version'], env: { PATH: evilPath } }] }],
      ['policy-path', { policy: { env: { set: { PATH: evilPath } } }, nodes: [{ id: 'a', kind: 'command', cmd: 'git', args: ['--version'] }] }],
      ['unresolvable', { nodes: [{ id: 'a', kind: 'command', cmd: 'git', args: ['--version'], env: { PATH: join(dir, 'nowhere') } }] }],
    ];
    for (const [id, extra] of runs) {
      const result = await cli(home, ['run', writeSpec(dir, { name: id, cwd: dir, ...extra }, `${id}.json`), '--id', id, '--wait']);
      expect(result.exitCode, id).toBe(1);
      expect(readCheckpoint(home, id).error, id).toMatchObject({ code: 'POLICY_DENIED' });
    }
    expect(existsSync(marker)).toBe(false);
    const relative = await cli(home, ['run', writeSpec(dir, { name: 'rel', cwd: dir, policy: { commands: ['./git'] }, nodes: [{ id: 'a', kind: 'command', cmd: './git' }] }, 'rel.json'), '--wait']);
    expect(relative.exitCode).toBe(2);
    expect(relative.stderr).toMatch(/policy\.commands\[0\]: must be a program name, an absolute path, or \*/);
    const plain = await cli(home, ['run', writeSpec(dir, { name: 'ok', cwd: dir, nodes: [{ id: 'a', kind: 'command', cmd: 'git', args: ['--version'] }] }, 'ok.json'), '--wait']);
    expect(plain.exitCode, plain.stderr).toBe(0);
  });
});

describe('regressions: budgets count everything and cannot be dodged', () => {
  it('usage of attempts whose worker was lost counts toward the run budget', async () => {
    const home = makeHome({ maxRequeues: 5 });
    const dir = tempDir();
    const spec = writeSpec(dir, { name: 'lossy', cwd: dir, budget: { costUsd: 1.5 }, nodes: [script('crashy', 'lost.mjs', { isolation: 'process' })] });
    const result = await cli(home, ['run', spec, '--id', 'lossy', '--wait']);
    expect(result.exitCode).toBe(1);
    const record = readCheckpoint(home, 'lossy');
    expect(record.error).toMatchObject({ code: 'BUDGET_EXCEEDED', detail: { limit: 'costUsd', scope: 'run' } });
    expect(record.usage.costUsd).toBeCloseTo(1.8);
    expect(record.nodes.crashy!.attempts.map((a) => a.state)).toEqual(['lost', 'lost', 'failed']);
    assertConsistent(home, 'lossy');
  });

  it('a fan-out member over its budget is not retried, and one over the run budget fails the run', async () => {
    const home = makeHome();
    const dir = tempDir();
    const member = (name: string, seconds: number) => ({ name, engine: 'custom', customEngine: { bin: 'sleep', args: [String(seconds)], promptVia: 'stdin' } });
    const own = writeSpec(dir, { name: 'fan', cwd: dir, nodes: [{ id: 'fan', kind: 'fanout', prompt: 'p', agents: [member('quick', 0), member('slow', 5)], budget: { wallMs: 500 }, retry: { max: 2, backoffMs: 0 } }] }, 'own.json');
    expect((await cli(home, ['run', own, '--id', 'fo1', '--wait'])).exitCode).toBe(1);
    expect(readCheckpoint(home, 'fo1').nodes.fan!.attempts).toHaveLength(1);
    const run = writeSpec(dir, { name: 'fan', cwd: dir, budget: { wallMs: 500 }, nodes: [{ id: 'fan', kind: 'fanout', prompt: 'p', agents: [member('slow', 5)], onFailure: 'continue' }, { id: 'after', kind: 'command', cmd: 'true' }] }, 'run.json');
    expect((await cli(home, ['run', run, '--id', 'fo2', '--wait'])).exitCode).toBe(1);
    expect(readCheckpoint(home, 'fo2')).toMatchObject({ state: 'failed', error: { code: 'BUDGET_EXCEEDED', detail: { scope: 'run' } } });
    expect(readCheckpoint(home, 'fo2').nodes.after!.state).toBe('skipped');
  });

  it('CPU spent before the first sample counts: a busy loop past cpuMs is a breach', async () => {
    const home = makeHome();
    const dir = tempDir();
    const spec = writeSpec(dir, { name: 'burn', cwd: dir, nodes: [script('burn', 'burn.mjs', { input: { ms: 1400 }, budget: { cpuMs: 1000 } })] });
    expect((await cli(home, ['run', spec, '--id', 'burn', '--wait'])).exitCode).toBe(1);
    expect(readCheckpoint(home, 'burn').error).toMatchObject({ code: 'BUDGET_EXCEEDED', detail: { limit: 'cpuMs', limitValue: 1000 } });
  });

  it('absurd usage reports are clamped: the run ends cleanly with finite totals', async () => {
    const home = makeHome();
    const dir = tempDir();
    const spec = writeSpec(dir, { name: 'absurd', cwd: dir, nodes: [script('t', 'overflow.mjs'), script('p', 'overflow.mjs', { isolation: 'process' }), script('big', 'overflow.mjs', { export: 'huge', onFailure: 'continue' })] });
    const result = await cli(home, ['run', spec, '--id', 'absurd', '--wait']);
    expect(result.exitCode, result.stderr).toBe(0);
    const record = readCheckpoint(home, 'absurd');
    expect(Number.isFinite(record.usage.costUsd)).toBe(true);
    expect(record.usage.costUsd).toBe(4e6);
    expect(record.nodes.big!.attempts[0]!.error).toMatchObject({ code: 'SCRIPT_FAILED', message: expect.stringContaining('the limit is 8388608') });
    assertConsistent(home, 'absurd');
  });
});
