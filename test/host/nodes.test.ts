import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { simpleGit } from 'simple-git';
import { describe, expect, it } from 'vitest';
import { assertConsistent, cli, makeHome, markNode, marks, readCheckpoint, readEvents, spawnCli, tempDir, waitFor, writeSpec } from '../helpers/cli.js';

async function gitRepo(): Promise<string> {
  const dir = tempDir('rw-repo-');
  writeFileSync(join(dir, 'README'), 'hello\n');
  const git = simpleGit(dir);
  await git.init();
  await git.addConfig('user.name', 't').addConfig('user.email', 't@t.invalid').addConfig('commit.gpgsign', 'false');
  await git.add('.').commit('init');
  return dir;
}

const check = (file: string) => ({ type: 'command', id: 'has-file', cmd: 'test', args: ['-f', file] });

describe('verdicts and the terminal barrier', () => {
  it('a passing verdict stands when nothing touched the tree after it', async () => {
    const home = makeHome();
    const repo = await gitRepo();
    const spec = writeSpec(repo, { name: 'green', cwd: repo, contract: { checks: [check('README')] }, nodes: [{ id: 'noop', kind: 'command', cmd: 'true' }] }, '.spec.json');
    const result = await cli(home, ['run', spec, '--id', 'g', '--wait']);
    expect(result.exitCode, result.stdout).toBe(0);
    const record = readCheckpoint(home, 'g');
    expect(record).toMatchObject({ state: 'completed', outcome: 'verified' });
    expect(Object.keys(record.nodes)).toEqual(['noop', '__verify']);
  });

  it('a verdict the tree moved away from drops to unverified, with the reason', async () => {
    const home = makeHome();
    const repo = await gitRepo();
    const spec = writeSpec(repo, {
      name: 'moved',
      cwd: repo,
      contract: { checks: [check('README')] },
      nodes: [
        { id: 'verify', kind: 'verifier', contract: 'run' },
        // Rewrites an already-modified file: a status-based digest would not see this.
        { id: 'edit', kind: 'command', cmd: 'sh', args: ['-c', 'echo more >> README'] },
      ],
    }, '.spec.json');
    writeFileSync(join(repo, 'README'), 'changed before the run\n');
    const result = await cli(home, ['run', spec, '--id', 'm', '--wait']);
    expect(result.exitCode).toBe(0);
    const record = readCheckpoint(home, 'm');
    expect(record).toMatchObject({ state: 'completed', outcome: 'unverified' });
    expect(record.outcomeReason).toContain('changed after the last passing verdict');
  });

  it('a file check covers its target even when git ignores it', async () => {
    const home = makeHome();
    const repo = await gitRepo();
    writeFileSync(join(repo, '.gitignore'), 'marker.txt\n');
    const spec = writeSpec(repo, {
      name: 'ignored',
      cwd: repo,
      contract: { checks: [{ type: 'file', path: 'marker.txt', matches: '^ok' }] },
      nodes: [
        { id: 'mk', kind: 'command', cmd: 'sh', args: ['-c', 'echo ok > marker.txt'] },
        { id: 'verify', kind: 'verifier', contract: 'run' },
        { id: 'break', kind: 'command', cmd: 'sh', args: ['-c', 'echo broken > marker.txt'] },
      ],
    }, '.spec.json');
    expect((await cli(home, ['run', spec, '--id', 'ig', '--wait'])).exitCode).toBe(0);
    expect(readCheckpoint(home, 'ig')).toMatchObject({ state: 'completed', outcome: 'unverified', outcomeReason: expect.stringContaining('changed after the last passing verdict') });
  });

  it('a store inside the repository is not part of the tree the verdict describes', async () => {
    const repo = await gitRepo();
    const home = join(repo, '.runwarden');
    writeSpec(home, { heartbeatTimeoutMs: 1500, killGraceMs: 500 }, 'config.json');
    const spec = writeSpec(repo, { name: 'inside', cwd: repo, contract: { checks: [check('README')] }, nodes: [{ id: 'verify', kind: 'verifier', contract: 'run' }, { id: 'after', kind: 'command', cmd: 'true' }] }, '.spec.json');
    expect((await cli(home, ['run', spec, '--id', 'in', '--wait'])).exitCode).toBe(0);
    expect(readCheckpoint(home, 'in')).toMatchObject({ state: 'completed', outcome: 'verified' });
  });

  it('a failing contract refutes the run (exit 1), with evidence on disk', async () => {
    const home = makeHome();
    const dir = tempDir();
    const spec = writeSpec(dir, { name: 'red', cwd: dir, contract: { checks: [check('missing'), { type: 'file', id: 'optional', path: 'nope', required: false }] }, nodes: [{ id: 'noop', kind: 'command', cmd: 'true' }] });
    const result = await cli(home, ['run', spec, '--id', 'r', '--wait']);
    expect(result.exitCode).toBe(1);
    const record = readCheckpoint(home, 'r');
    expect(record).toMatchObject({ state: 'failed', outcome: 'refuted', error: { code: 'CHECKS_FAILED' } });
    const evidence = await cli(home, ['evidence', 'r', '--json']);
    const bundle = JSON.parse(evidence.stdout);
    expect(bundle).toMatchObject({ passed: false, digest: null, results: [{ id: 'has-file', passed: false, exitCode: 1 }, { id: 'optional', passed: false, required: false }] });
  });

  it('maxNodeVisits stops a runaway loop with a clear failure', async () => {
    const home = makeHome();
    const dir = tempDir();
    const spec = writeSpec(dir, { name: 'loop', cwd: dir, maxNodeVisits: 3, nodes: [{ id: 'spin', kind: 'command', cmd: 'true' }, { id: 'again', kind: 'router', routes: [{ when: { type: 'always' }, to: 'spin' }] }] });
    const result = await cli(home, ['run', spec, '--id', 'l', '--wait']);
    expect(result.exitCode).toBe(1);
    expect(readCheckpoint(home, 'l')).toMatchObject({ state: 'failed', error: { code: 'MAX_VISITS', node: 'spin' } });
    assertConsistent(home, 'l');
  });

  it('retries with backoff, then continues past a failure when onFailure is continue', async () => {
    const home = makeHome();
    const dir = tempDir();
    const mark = join(dir, 'marks');
    const spec = writeSpec(dir, {
      name: 'flaky',
      cwd: dir,
      nodes: [{ ...markNode('bad', mark), args: ['-c', `echo bad >> "${mark}"; exit 4`], retry: { max: 2, backoffMs: 10 }, onFailure: 'continue' }, markNode('after', mark)],
    });
    const result = await cli(home, ['run', spec, '--id', 'f', '--wait']);
    expect(result.exitCode).toBe(0);
    expect(marks(mark)).toEqual({ bad: 3, after: 1 });
    const failures = readEvents(home, 'f').filter((e) => e.type === 'node_failed');
    expect(failures.map((e) => e.type === 'node_failed' && [e.retryInMs, e.error.code])).toEqual([
      [10, 'COMMAND_FAILED'],
      [20, 'COMMAND_FAILED'],
      [undefined, 'COMMAND_FAILED'],
    ]);
  });
});

describe('outputs', () => {
  it('keeps the last MiB of a large output and records how much was written; the terminal gets no escape sequences', async () => {
    const home = makeHome();
    const dir = tempDir();
    const spec = writeSpec(dir, {
      name: 'big',
      cwd: dir,
      nodes: [
        { id: 'big', kind: 'command', cmd: 'sh', args: ['-c', 'head -c 3000000 /dev/zero | tr "\\0" x; echo; echo END'] },
        { id: 'ansi', kind: 'command', cmd: 'printf', args: ['\\033[31mred\\033[0m \\007bell'] },
      ],
    });
    const result = await cli(home, ['run', spec, '--id', 'big', '--wait']);
    expect(result.exitCode).toBe(0);
    const output = readCheckpoint(home, 'big').nodes.big!.attempts[0]!.output!;
    expect(output.bytes).toBe(1_048_576);
    expect(output.totalBytes).toBe(3_000_005);
    expect(readFileSync(join(home, 'runs/big', output.artifact), 'utf8').endsWith('x\nEND\n')).toBe(true);
    expect(result.stdout).toContain('✓ ansi');
    expect(result.stdout).toContain('red bell');
    expect(result.stdout).not.toMatch(/[\x1b\x07]/);
  });
});

describe('fan-out', () => {
  it('runs members as parallel executions and joins their outputs, or synthesizes them', async () => {
    const home = makeHome();
    const dir = tempDir();
    const member = (name: string) => ({
      name,
      engine: 'custom',
      customEngine: { bin: 'sh', args: ['-c', `date +%s%N > "${dir}/${name}.start"; sleep 0.5; date +%s%N > "${dir}/${name}.end"; echo "${name} says hi"`] },
    });
    const spec = writeSpec(dir, {
      name: 'fan',
      cwd: dir,
      nodes: [
        { id: 'fan', kind: 'fanout', prompt: 'p', agents: [member('m1'), member('m2')] },
        { id: 'syn', kind: 'fanout', prompt: 'p', agents: [{ name: 'solo', engine: 'custom', customEngine: { bin: 'echo', args: ['solo'] } }], synthesize: true, synthesizer: { engine: 'custom', customEngine: { bin: 'sh', args: ['-c', 'echo merged'] } } },
      ],
    });
    const result = await cli(home, ['run', spec, '--id', 'fo', '--wait']);
    expect(result.exitCode, result.stdout).toBe(0);
    const t = (f: string) => BigInt(readFileSync(join(dir, f), 'utf8').trim());
    // The two members' run intervals overlap.
    expect(t('m1.start') < t('m2.end') && t('m2.start') < t('m1.end')).toBe(true);
    const record = readCheckpoint(home, 'fo');
    expect(record.nodes.fan!.attempts[0]!.executions).toEqual(['fo/fan/a1/m1', 'fo/fan/a1/m2']);
    expect(readFileSync(join(home, 'runs/fo/nodes/fan/a1/output.txt'), 'utf8')).toBe('### m1\n\nm1 says hi\n\n### m2\n\nm2 says hi\n');
    expect(readFileSync(join(home, 'runs/fo/nodes/syn/a1/output.txt'), 'utf8')).toBe('merged\n');
    expect(record.usage.executions).toBe(4);
  });

  it('fails the node when a member fails, naming it', async () => {
    const home = makeHome();
    const dir = tempDir();
    const spec = writeSpec(dir, {
      name: 'fan-fail',
      cwd: dir,
      nodes: [{ id: 'fan', kind: 'fanout', prompt: 'p', agents: [{ name: 'good', engine: 'custom', customEngine: { bin: 'true' } }, { name: 'bad', engine: 'custom', customEngine: { bin: 'false' } }] }],
    });
    expect((await cli(home, ['run', spec, '--id', 'ff', '--wait'])).exitCode).toBe(1);
    expect(readCheckpoint(home, 'ff').error).toMatchObject({ code: 'FANOUT_FAILED', message: expect.stringContaining('bad (ENGINE_FAILED') });
  });
});

describe('subflows', () => {
  it('runs a child run from a spec file and adopts its verdict', async () => {
    const home = makeHome();
    const dir = tempDir();
    writeSpec(join(dir, 'flows'), { name: 'child', contract: { checks: [{ type: 'command', cmd: 'true' }] }, nodes: [{ id: 'inner', kind: 'command', cmd: 'true' }] }, 'child.json');
    const spec = writeSpec(dir, { name: 'parent', cwd: dir, nodes: [{ id: 'sub', kind: 'subflow', workflow: './flows/child.json' }, { id: 'gate', kind: 'router', routes: [{ when: { type: 'verified', node: 'sub' }, to: 'ok' }], default: 'ok' }, { id: 'ok', kind: 'command', cmd: 'true' }] });
    const result = await cli(home, ['run', spec, '--id', 'p', '--wait']);
    expect(result.exitCode, result.stdout + result.stderr).toBe(0);
    const parent = readCheckpoint(home, 'p');
    expect(parent.nodes.sub!.attempts[0]!.childRunId).toBe('p.sub.a1');
    expect(parent.nodes.sub!.verified).toBe(true);
    expect(parent.lastVerdict).toMatchObject({ node: 'sub', passed: true, childRunId: 'p.sub.a1' });
    expect(readCheckpoint(home, 'p.sub.a1')).toMatchObject({ state: 'completed', outcome: 'verified', parentRunId: 'p', depth: 1 });
    const list = (JSON.parse((await cli(home, ['list', '--json'])).stdout) as { runs: Array<{ runId: string }> }).runs;
    expect(list.map((r) => r.runId)).toEqual(['p']);
    const all = (JSON.parse((await cli(home, ['list', '--all', '--json'])).stdout) as { runs: Array<{ runId: string }> }).runs;
    expect(all.map((r) => r.runId).sort()).toEqual(['p', 'p.sub.a1']);
    const deleted = await cli(home, ['delete', 'p', '--json']);
    expect(JSON.parse(deleted.stdout)).toEqual({ deleted: ['p.sub.a1', 'p'] });
  });

  it('cancelling the parent cancels the child run it is waiting on', async () => {
    const home = makeHome();
    const dir = tempDir();
    const spec = writeSpec(dir, { name: 'parent', cwd: dir, nodes: [{ id: 'sub', kind: 'subflow', workflow: { name: 'child', nodes: [{ id: 'slow', kind: 'command', cmd: 'sleep', args: ['30'] }] } }] });
    const owner = spawnCli(home, ['run', spec, '--id', 'pcx', '--wait']);
    await waitFor(() => readEvents(home, 'pcx.sub.a1').some((e) => e.type === 'node_started'), 'the child node');
    expect((await cli(home, ['cancel', 'pcx'])).exitCode).toBe(0);
    expect((await owner).exitCode).toBe(1);
    expect(readCheckpoint(home, 'pcx')).toMatchObject({ state: 'cancelled', error: { code: 'CANCELLED' } });
    expect(readCheckpoint(home, 'pcx.sub.a1')).toMatchObject({ state: 'cancelled' });
    assertConsistent(home, 'pcx');
    assertConsistent(home, 'pcx.sub.a1');
  });

  it('never adopts an unrelated run that holds the child id: the subflow fails clearly instead', async () => {
    const home = makeHome();
    const dir = tempDir();
    const squatter = writeSpec(dir, { name: 'squatter', contract: { checks: [{ type: 'command', cmd: 'true' }] }, nodes: [{ id: 'x', kind: 'command', cmd: 'true' }] }, 'squatter.json');
    expect((await cli(home, ['run', squatter, '--id', 'q.gate.a1', '--wait'])).exitCode).toBe(0);
    const mark = join(dir, 'marks');
    const spec = writeSpec(dir, { name: 'q', cwd: dir, nodes: [{ id: 'gate', kind: 'subflow', workflow: { name: 'must-fail', contract: { checks: [{ type: 'command', cmd: 'false' }] }, nodes: [markNode('x', mark)] } }] });
    const result = await cli(home, ['run', spec, '--id', 'q', '--wait']);
    expect(result.exitCode).toBe(1);
    expect(readCheckpoint(home, 'q')).toMatchObject({ state: 'failed', outcome: 'unverified', error: { code: 'SUBFLOW_FAILED', message: expect.stringContaining('q.gate.a1') } });
    expect(readCheckpoint(home, 'q.gate.a1').name).toBe('squatter');
  });

  it('refuses a subflow cycle and nesting past the bound, naming the field', async () => {
    const home = makeHome();
    const dir = tempDir();
    writeSpec(dir, { name: 'a', nodes: [{ id: 'toB', kind: 'subflow', workflow: './b.json' }] }, 'a.json');
    writeSpec(dir, { name: 'b', nodes: [{ id: 'toA', kind: 'subflow', workflow: './a.json' }] }, 'b.json');
    const cycle = await cli(home, ['run', join(dir, 'a.json'), '--wait']);
    expect(cycle.exitCode).toBe(2);
    expect(cycle.stderr).toMatch(/nodes\[0\]\.workflow\.nodes\[0\]\.workflow: subflow cycle/);
    let deep: Record<string, unknown> = { name: 'leaf', nodes: [{ id: 'x', kind: 'command', cmd: 'true' }] };
    for (let i = 0; i < 9; i++) deep = { name: `level-${i}`, nodes: [{ id: 's', kind: 'subflow', workflow: deep }] };
    const tooDeep = await cli(home, ['run', writeSpec(dir, deep, 'deep.json'), '--wait']);
    expect(tooDeep.exitCode).toBe(2);
    expect(tooDeep.stderr).toContain('subflows nest at most 8 deep');
  });

  it('after a crash inside the child, resuming the parent adopts the child run instead of starting it over', async () => {
    const home = makeHome();
    const dir = tempDir();
    const mark = join(dir, 'marks');
    const spec = writeSpec(dir, { name: 'parent', cwd: dir, nodes: [{ id: 'sub', kind: 'subflow', workflow: { name: 'child', nodes: [markNode('one', mark), markNode('two', mark)] } }, markNode('after', mark)] });
    const crashed = await cli(home, ['run', spec, '--id', 'pc', '--wait'], { env: { RUNWARDEN_FAILPOINTS: 'kernel.after-node-started:two' } });
    expect(crashed.exitCode).not.toBe(0);
    const resumed = await cli(home, ['resume', 'pc', '--wait']);
    expect(resumed.exitCode, resumed.stdout + resumed.stderr).toBe(0);
    expect(marks(mark)).toEqual({ one: 1, two: 1, after: 1 });
    const parent = readCheckpoint(home, 'pc');
    expect(parent.nodes.sub!.attempts.map((a) => [a.state, a.childRunId])).toEqual([
      ['lost', 'pc.sub.a1'],
      ['succeeded', 'pc.sub.a1'],
    ]);
    assertConsistent(home, 'pc');
    assertConsistent(home, 'pc.sub.a1');
  });
});
