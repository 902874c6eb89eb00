import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, cli, makeHome, readCheckpoint, tempDir, writeSpec } from '../helpers/cli.js';

const SCRIPTS = join(ROOT, 'test/fixtures/scripts');

describe('runtime policy', () => {
  it('a script in process isolation that writes outside fs.write gets the runtime permission error; inside, it may', async () => {
    const home = makeHome();
    const dir = tempDir();
    const outside = join(tempDir(), 'outside.txt');
    const writer = (id: string, path: string) => ({ id, kind: 'script', module: join(SCRIPTS, 'writer.mjs'), input: { path }, onFailure: 'continue' });
    const spec = writeSpec(dir, {
      name: 'sandboxed',
      cwd: dir,
      policy: { fs: { read: [dir], write: [join(dir, 'out')] } },
      nodes: [writer('inside', join(dir, 'out', 'ok.txt')), writer('outside', outside)],
    });
    await import('node:fs').then((fs) => fs.mkdirSync(join(dir, 'out')));
    const result = await cli(home, ['run', spec, '--id', 'fs', '--wait']);
    expect(result.exitCode, result.stderr).toBe(0);
    const record = readCheckpoint(home, 'fs');
    expect(record.nodes.inside!.state).toBe('succeeded');
    expect(readFileSync(join(dir, 'out', 'ok.txt'), 'utf8')).toBe('written by a script');
    expect(record.nodes.outside!.attempts[0]).toMatchObject({ isolation: 'process', state: 'failed', error: { code: 'SCRIPT_FAILED', message: expect.stringContaining('ERR_ACCESS_DENIED') } });
    expect(existsSync(outside)).toBe(false);
    // The effective policy is recorded with the attempt.
    expect(record.nodes.outside!.attempts[0]!.policy).toMatchObject({ fs: { read: [dir], write: [join(dir, 'out')] }, childProcesses: false });
  });

  it('a script in a process may not start processes unless its policy allows it', async () => {
    const home = makeHome();
    const dir = tempDir();
    const spawner = (id: string, extra: Record<string, unknown>) => ({ id, kind: 'script', module: join(SCRIPTS, 'spawner.mjs'), onFailure: 'continue', ...extra });
    const spec = writeSpec(dir, {
      name: 'spawns',
      cwd: dir,
      nodes: [spawner('denied', { policy: { childProcesses: false } }), spawner('default', { isolation: 'process' }), spawner('allowed', { policy: { childProcesses: true } })],
    });
    expect((await cli(home, ['run', spec, '--id', 'sp', '--wait'])).exitCode).toBe(0);
    const record = readCheckpoint(home, 'sp');
    expect(record.nodes.denied!.attempts[0]).toMatchObject({ isolation: 'process', error: { code: 'SCRIPT_FAILED', message: expect.stringContaining('ERR_ACCESS_DENIED') } });
    expect(record.nodes.default!.attempts[0]).toMatchObject({ isolation: 'process', policy: { childProcesses: false }, error: { code: 'SCRIPT_FAILED' } });
    expect(record.nodes.allowed!.attempts[0]).toMatchObject({ isolation: 'process', state: 'succeeded' });
    expect(record.nodes.allowed!.attempts[0]!.output!.preview).toBe('"spawned"');
  });

  it('a command not in `commands` is refused before it starts, also as a check', async () => {
    const home = makeHome();
    const dir = tempDir();
    const marker = join(dir, 'ran');
    const spec = writeSpec(dir, {
      name: 'allow-list',
      cwd: dir,
      policy: { commands: ['sh', 'true'] },
      contract: { checks: [{ type: 'command', id: 'touchy', cmd: 'touch', args: [marker] }] },
      nodes: [
        { id: 'ok', kind: 'command', cmd: 'sh', args: ['-c', 'echo allowed'] },
        { id: 'nope', kind: 'command', cmd: 'touch', args: [marker], onFailure: 'continue' },
      ],
    });
    const result = await cli(home, ['run', spec, '--id', 'cmd', '--wait']);
    expect(result.exitCode).toBe(1);
    const record = readCheckpoint(home, 'cmd');
    expect(record.nodes.ok!.state).toBe('succeeded');
    expect(record.nodes.nope!.attempts[0]!.error).toMatchObject({ code: 'POLICY_DENIED', message: expect.stringContaining("'touch'") });
    expect(record.outcome).toBe('refuted');
    const evidence = JSON.parse((await cli(home, ['evidence', 'cmd', '--json'])).stdout) as { results: Array<{ detail: string }> };
    expect(evidence.results[0]!.detail).toContain('not among the commands the policy allows');
    expect(existsSync(marker)).toBe(false);
  });

  it('host variables not in env.allow never reach the worker', async () => {
    const home = makeHome();
    const dir = tempDir();
    const printEnv = (id: string, policy?: Record<string, unknown>) => ({ id, kind: 'script', module: join(SCRIPTS, 'env.mjs'), ...(policy === undefined ? {} : { policy }) });
    const commandEnv = { id: 'cmd', kind: 'command', cmd: 'sh', args: ['-c', 'env | cut -d= -f1 | sort | tr "\\n" " "'] };
    const spec = writeSpec(dir, {
      name: 'env',
      cwd: dir,
      nodes: [printEnv('default'), printEnv('named', { env: { allow: ['PATH', 'RW_TEST_*'], set: { GREETING: 'hi' } } }), commandEnv],
    });
    const result = await cli(home, ['run', spec, '--id', 'env', '--wait'], { env: { RW_TEST_TOKEN: 'secret-value', AWS_SECRET_ACCESS_KEY: 'never' } });
    expect(result.exitCode, result.stderr).toBe(0);
    const record = readCheckpoint(home, 'env');
    const names = (node: string): string[] => JSON.parse(readFileSync(join(home, 'runs/env', record.nodes[node]!.attempts[0]!.output!.artifact), 'utf8')) as string[];
    expect(names('default')).not.toContain('RW_TEST_TOKEN');
    expect(names('default')).not.toContain('AWS_SECRET_ACCESS_KEY');
    expect(names('default')).toContain('PATH');
    expect(names('named')).toEqual(expect.arrayContaining(['PATH', 'RW_TEST_TOKEN', 'GREETING']));
    expect(names('named')).not.toContain('HOME');
    const commandNames = readFileSync(join(home, 'runs/env', record.nodes.cmd!.attempts[0]!.output!.artifact), 'utf8');
    expect(commandNames).not.toContain('RW_TEST_TOKEN');
    expect(commandNames).not.toContain('AWS_SECRET_ACCESS_KEY');
  });

  it('a spec asking for more than the host ceiling is rejected at validation, naming the field', async () => {
    const dir = tempDir();
    const home = makeHome({ policy: { commands: ['sh', 'git'], env: { allow: ['PATH', 'HOME'] }, fs: { read: [dir], write: [dir] }, childProcesses: false } });
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ policy: { commands: ['curl'] } }, /policy\.commands\[0\]: 'curl' is not among the commands the policy above allows/],
      [{ policy: { env: { allow: ['AWS_*'] } } }, /policy\.env\.allow\[0\]: 'AWS_\*' is not allowed/],
      [{ policy: { fs: { write: ['/etc'] } } }, /policy\.fs\.write\[0\]: \/etc is outside the paths/],
      [{ nodes: [{ id: 'a', kind: 'command', cmd: 'sh', policy: { childProcesses: true, commands: ['sh'] } }] }, /nodes\[0\]\.policy\.childProcesses: the policy above does not allow child processes/],
      [{ nodes: [{ id: 's', kind: 'script', module: join(SCRIPTS, 'echo.mjs'), isolation: 'thread' }] }, /nodes\[0\]\.isolation: a thread cannot hold a fs policy/],
    ];
    for (const [extra, message] of cases) {
      const spec = writeSpec(dir, { name: 'greedy', cwd: dir, nodes: [{ id: 'a', kind: 'command', cmd: 'sh' }], ...extra });
      const result = await cli(home, ['run', spec, '--wait']);
      expect(result.exitCode, JSON.stringify(extra)).toBe(2);
      expect(result.stderr).toMatch(message);
      expect(existsSync(join(home, 'runs'))).toBe(false);
    }
    const narrower = writeSpec(dir, { name: 'modest', cwd: dir, policy: { commands: ['sh'] }, nodes: [{ id: 'a', kind: 'command', cmd: 'sh', args: ['-c', 'true'] }] }, 'modest.json');
    expect((await cli(home, ['run', narrower, '--wait'])).exitCode).toBe(0);
  });
});
