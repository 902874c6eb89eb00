import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isRunning } from '../../src/util/process-tree.js';
import { assertConsistent, cli, makeHome, markNode, marks, readCheckpoint, readEvents, spawnCli, tempDir, waitFor, writeSpec } from '../helpers/cli.js';

describe('control across processes', () => {
  it('cancel from a second process reaches a run held by a first process', async () => {
    const home = makeHome();
    const dir = tempDir();
    const spec = writeSpec(dir, {
      name: 'long',
      cwd: dir,
      nodes: [{ id: 'slow', kind: 'command', cmd: 'sh', args: ['-c', `echo $$ > "${dir}/slow.pid"; sleep 60`] }, { id: 'after', kind: 'command', cmd: 'true' }],
    });
    const owner = spawnCli(home, ['run', spec, '--id', 'cx', '--wait']);
    const pid = Number(await waitFor(() => existsSync(join(dir, 'slow.pid')) && readFileSync(join(dir, 'slow.pid'), 'utf8').trim(), 'the slow node'));
    const cancel = await cli(home, ['cancel', 'cx', '--json']);
    expect(cancel.exitCode, cancel.stderr).toBe(0);
    expect(JSON.parse(cancel.stdout)).toMatchObject({ status: 'applied' });
    const ownerResult = await owner;
    expect(ownerResult.exitCode).toBe(1);
    const record = readCheckpoint(home, 'cx');
    expect(record).toMatchObject({ state: 'cancelled', error: { code: 'CANCELLED' } });
    expect(record.nodes.slow!.attempts.map((a) => a.state)).toEqual(['cancelled']);
    expect(record.nodes.after!.state).toBe('skipped');
    expect(isRunning(pid)).toBe(false);
    assertConsistent(home, 'cx');
    // A finished run refuses further control, clearly.
    const again = await cli(home, ['cancel', 'cx']);
    expect(again.exitCode).toBe(2);
    expect(again.stderr).toContain('RUN_TERMINAL');
  });

  it('steer from a second process is prepended to the next agent prompt, never dropped', async () => {
    const home = makeHome();
    const dir = tempDir();
    const go = join(dir, 'go');
    const spec = writeSpec(dir, {
      name: 'steered',
      cwd: dir,
      nodes: [
        { id: 'wait', kind: 'command', cmd: 'sh', args: ['-c', `while [ ! -f "${go}" ]; do sleep 0.05; done`] },
        { id: 'think', kind: 'agent', engine: 'custom', customEngine: { bin: 'cat', promptVia: 'stdin' }, prompt: 'Write the report.' },
        { id: 'late', kind: 'command', cmd: 'true' },
      ],
    });
    const owner = spawnCli(home, ['run', spec, '--id', 'st', '--wait']);
    await waitFor(() => readEvents(home, 'st').some((e) => e.type === 'node_started' && e.node === 'wait'), 'the first node');
    const steer = await cli(home, ['steer', 'st', 'Use British spelling.']);
    expect(steer.exitCode, steer.stderr).toBe(0);
    expect(steer.stdout).toContain('steer applied');
    await cli(home, ['steer', 'st', 'Be brief.']);
    await import('node:fs').then((fs) => fs.writeFileSync(go, ''));
    expect((await owner).exitCode).toBe(0);
    const output = readFileSync(join(home, 'runs/st/nodes/think/a1/output.txt'), 'utf8');
    expect(output).toBe('Use British spelling.\n\nBe brief.\n\nWrite the report.');
    const record = readCheckpoint(home, 'st');
    expect(record.pendingSteers).toEqual([]);
    expect(readEvents(home, 'st').find((e) => e.type === 'node_started' && e.node === 'think')).toMatchObject({ steer: { text: 'Use British spelling.\n\nBe brief.' } });
  });

  it('a steer carried by an attempt that is lost or retried goes to the next attempt', async () => {
    const home = makeHome();
    const dir = tempDir();
    const go = join(dir, 'go');
    // Attempt 1 records its prompt and stalls (its worker is then killed); attempt 2 fails; attempt 3 succeeds.
    const engine = [
      'p=$(cat); n=$(ls prompt-*.txt 2>/dev/null | wc -l); printf %s "$p" > prompt-$n.txt',
      'if [ "$n" -eq 0 ]; then echo $PPID > worker.pid; sleep 30; fi',
      'if [ "$n" -eq 1 ]; then exit 5; fi',
      'echo done',
    ].join('\n');
    const spec = writeSpec(dir, {
      name: 'steer-loss',
      cwd: dir,
      nodes: [
        { id: 'wait', kind: 'command', cmd: 'sh', args: ['-c', `while [ ! -f "${go}" ]; do sleep 0.05; done`] },
        { id: 'agent', kind: 'agent', engine: 'custom', customEngine: { bin: 'sh', args: ['-c', engine], promptVia: 'stdin' }, prompt: 'BASE', retry: { max: 1, backoffMs: 0 } },
      ],
    });
    const owner = spawnCli(home, ['run', spec, '--id', 'sl', '--wait']);
    await waitFor(() => readEvents(home, 'sl').some((e) => e.type === 'node_started' && e.node === 'wait'), 'the first node');
    expect((await cli(home, ['steer', 'sl', 'S1'])).exitCode).toBe(0);
    await import('node:fs').then((fs) => fs.writeFileSync(go, ''));
    const workerPid = Number(await waitFor(() => existsSync(join(dir, 'worker.pid')) && readFileSync(join(dir, 'worker.pid'), 'utf8').trim(), 'attempt 1'));
    process.kill(workerPid, 'SIGKILL');
    expect((await owner).exitCode).toBe(0);
    for (const n of [0, 1, 2]) expect(readFileSync(join(dir, `prompt-${n}.txt`), 'utf8')).toBe('S1\n\nBASE');
    expect(readCheckpoint(home, 'sl').pendingSteers).toEqual([]);
    assertConsistent(home, 'sl');
  });

  it('a human gate parks the run until approve; reject fails it', async () => {
    const home = makeHome();
    const dir = tempDir();
    const mark = join(dir, 'marks');
    const spec = writeSpec(dir, { name: 'gate', cwd: dir, nodes: [markNode('a', mark), { id: 'ok', kind: 'human_gate', prompt: 'Ship it?' }, markNode('b', mark)] });
    const early = await cli(home, ['approve', 'nope']);
    expect(early.exitCode).toBe(2);
    expect(early.stderr).toContain('RUN_NOT_FOUND');

    const approved = spawnCli(home, ['run', spec, '--id', 'g1', '--wait']);
    await waitFor(() => readCheckpoint(home, 'g1').state === 'awaiting_human', 'the gate');
    const ok = await cli(home, ['approve', 'g1']);
    expect(ok.exitCode, ok.stderr).toBe(0);
    expect((await approved).exitCode).toBe(0);
    expect(marks(mark)).toEqual({ a: 1, b: 1 });

    const rejected = spawnCli(home, ['run', spec, '--id', 'g2', '--wait']);
    await waitFor(() => readCheckpoint(home, 'g2').state === 'awaiting_human', 'the gate');
    expect((await cli(home, ['approve', 'g2', '--reject', '--reason', 'not today'])).exitCode).toBe(0);
    expect((await rejected).exitCode).toBe(1);
    expect(readCheckpoint(home, 'g2')).toMatchObject({ state: 'failed', error: { code: 'GATE_REJECTED', message: expect.stringContaining('not today') } });
    expect(marks(mark)).toEqual({ a: 2, b: 1 });
    assertConsistent(home, 'g2');
  });

  it('approve while nobody holds the run is applied durably and taken up by resume', async () => {
    const home = makeHome();
    const dir = tempDir();
    const mark = join(dir, 'marks');
    const spec = writeSpec(dir, { name: 'gate', cwd: dir, nodes: [{ id: 'ok', kind: 'human_gate', prompt: 'Go?' }, markNode('b', mark)] });
    const owner = spawnCli(home, ['run', spec, '--id', 'g3', '--wait']);
    await waitFor(() => readCheckpoint(home, 'g3').state === 'awaiting_human', 'the gate');
    owner.kill('SIGKILL');
    await owner;
    const approve = await cli(home, ['approve', 'g3']);
    expect(approve.exitCode, approve.stderr).toBe(0);
    expect(approve.stderr).toContain('runwarden resume g3');
    expect(marks(mark)).toEqual({});
    expect((await cli(home, ['resume', 'g3', '--wait'])).exitCode).toBe(0);
    expect(marks(mark)).toEqual({ b: 1 });
    assertConsistent(home, 'g3');
  });

  it('two processes starting the same run id at once: exactly one wins, every time, and runs its own spec', async () => {
    const home = makeHome();
    const dir = tempDir();
    const spec = (name: string) => writeSpec(dir, { name, cwd: dir, nodes: [{ id: 'x', kind: 'command', cmd: 'true' }] }, `${name}.json`);
    const [a, b] = [spec('from-a'), spec('from-b')];
    for (let i = 0; i < 5; i++) {
      const id = `same-${i}`;
      const [ra, rb] = await Promise.all([cli(home, ['run', a, '--id', id, '--wait']), cli(home, ['run', b, '--id', id, '--wait'])]);
      expect([ra.exitCode, rb.exitCode].sort()).toEqual([0, 2]);
      const [winner, loser] = ra.exitCode === 0 ? ['from-a', rb] : ['from-b', ra];
      expect(loser.stderr).toContain(`RUN_EXISTS]: run ${id} already exists`);
      expect(readCheckpoint(home, id)).toMatchObject({ name: winner, state: 'completed' });
      expect(JSON.parse(readFileSync(join(home, 'runs', id, 'spec.json'), 'utf8')).name).toBe(winner);
      assertConsistent(home, id);
    }
  });

  it('an owner whose lease was taken over (here: lease.json removed under it) stops its executions within a second or two', async () => {
    const home = makeHome({ leaseRenewMs: 60_000, leaseTtlMs: 120_000 }); // the check between commits, not the lease renewal, must notice
    const dir = tempDir();
    const script = `n=$(ls start-* 2>/dev/null | wc -l); echo $$ > start-$n; if [ "$n" -eq 0 ]; then sleep 30; fi`;
    const spec = writeSpec(dir, { name: 'taken', cwd: dir, nodes: [{ id: 'a', kind: 'command', cmd: 'sh', args: ['-c', script] }] });
    const first = spawnCli(home, ['run', spec, '--id', 'tk', '--wait']);
    const oldPid = Number(await waitFor(() => existsSync(join(dir, 'start-0')) && readFileSync(join(dir, 'start-0'), 'utf8').trim(), 'the first attempt'));
    await import('node:fs').then((fs) => fs.rmSync(join(home, 'runs/tk/lease.json')));
    const second = await cli(home, ['resume', 'tk', '--wait']);
    expect(second.exitCode, second.stderr).toBe(0);
    await waitFor(() => !isRunning(oldPid), "the superseded owner's program to be stopped", 3000);
    const firstResult = await first;
    expect(firstResult.exitCode).toBe(1);
    expect(String(firstResult.stdout)).toContain('superseded');
    assertConsistent(home, 'tk');
  });

  it('two processes resume the same run: one drives it, the other is refused by pid and host', async () => {
    const home = makeHome();
    const dir = tempDir();
    const mark = join(dir, 'marks');
    const spec = writeSpec(dir, { name: 'contended', cwd: dir, nodes: [markNode('a', mark, 1.5)] });
    expect((await cli(home, ['run', spec, '--id', 'rr', '--wait'], { env: { RUNWARDEN_FAILPOINTS: 'kernel.after-node-started:a' } })).exitCode).not.toBe(0);
    const [one, two] = await Promise.all([cli(home, ['resume', 'rr', '--wait']), cli(home, ['resume', 'rr', '--wait'])]);
    const results = [one, two].sort((x, y) => x.exitCode - y.exitCode);
    expect(results.map((r) => r.exitCode)).toEqual([0, 2]);
    expect(results[1]!.stderr).toMatch(/LEASE_HELD.*run rr is live elsewhere: held by pid \d+ on host \S+/);
    expect(marks(mark)).toEqual({ a: 1 });
    assertConsistent(home, 'rr');
  });
});
