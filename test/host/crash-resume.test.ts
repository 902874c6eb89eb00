import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isRunning } from '../../src/util/process-tree.js';
import { assertConsistent, cli, lastState, makeHome, markNode, marks, readCheckpoint, readEvents, spawnCli, tempDir, waitFor, writeSpec } from '../helpers/cli.js';

/** a → b → c, each appending its id to a mark file. */
function threeSteps(dir: string): { specPath: string; mark: string } {
  const mark = join(dir, 'marks');
  const specPath = writeSpec(dir, { name: 'three-steps', cwd: dir, nodes: [markNode('a', mark), markNode('b', mark, 0.2), markNode('c', mark)] });
  return { specPath, mark };
}

describe('the host dies, a new host resumes at a node boundary', () => {
  const cases: Array<{ failpoint: string; bRuns: number; why: string }> = [
    { failpoint: 'kernel.after-node-started:b', bRuns: 1, why: 'b committed as started, never dispatched' },
    { failpoint: 'kernel.before-result-commit:b', bRuns: 2, why: 'b ran, its result was lost with the host: at-least-once' },
    { failpoint: 'commit.after-publish@3', bRuns: 1, why: "a's result published, not yet applied" },
    { failpoint: 'commit.after-stage@3', bRuns: 1, why: "a's result staged, never published: a runs again" },
    { failpoint: 'commit.mid-apply@5', bRuns: 1, why: "b's result half applied" },
    { failpoint: 'commit.after-apply@6', bRuns: 1, why: "c's start applied, not cleaned up" },
  ];
  for (const { failpoint, bRuns, why } of cases) {
    it(`at ${failpoint} (${why})`, async () => {
      const home = makeHome();
      const dir = tempDir();
      const { specPath, mark } = threeSteps(dir);
      const crashed = await cli(home, ['run', specPath, '--id', 'crashy', '--wait'], { env: { RUNWARDEN_FAILPOINTS: failpoint } });
      expect(crashed.exitCode, crashed.stderr).not.toBe(0);
      expect(lastState(readEvents(home, 'crashy')).state).not.toBe('completed');
      const resumed = await cli(home, ['resume', 'crashy', '--wait']);
      expect(resumed.exitCode, resumed.stdout + resumed.stderr).toBe(0);
      const events = assertConsistent(home, 'crashy');
      expect(lastState(events)).toEqual({ state: 'completed', outcome: 'unverified' });
      const counts = marks(mark);
      // Succeeded nodes never run again; only the in-flight node may run twice.
      expect(counts.c).toBe(1);
      expect(counts.b).toBe(bRuns);
      expect(counts.a).toBe(failpoint === 'commit.after-stage@3' ? 2 : 1);
    });
  }

  it('SIGKILL mid-node: the worker dies with the host, the node restarts from the top, a host_lost re-queue is recorded', async () => {
    const home = makeHome();
    const dir = tempDir();
    const mark = join(dir, 'marks');
    const pidFile = join(dir, 'b.pid');
    const specPath = writeSpec(dir, {
      name: 'mid-node',
      cwd: dir,
      nodes: [markNode('a', mark), { id: 'b', kind: 'command', cmd: 'sh', args: ['-c', `echo b >> "${mark}"; if [ ! -f "${pidFile}" ]; then echo $$ > "${pidFile}"; sleep 30; fi`] }, markNode('c', mark)],
    });
    const host = spawnCli(home, ['run', specPath, '--id', 'midnode', '--wait']);
    const shellPid = Number(await waitFor(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim(), 'node b to start'));
    host.kill('SIGKILL');
    await host;
    // No execution outlives its host: the worker notices the closed channel and kills its group.
    await waitFor(() => !isRunning(shellPid), 'the orphaned node process to die', 5000);
    const resumed = await cli(home, ['resume', 'midnode', '--wait']);
    expect(resumed.exitCode, resumed.stdout + resumed.stderr).toBe(0);
    const events = assertConsistent(home, 'midnode');
    expect(events.filter((e) => e.type === 'node_requeued')).toMatchObject([{ node: 'b', attempt: 1, reason: 'host_lost', error: { code: 'HOST_LOST' } }]);
    expect(marks(mark)).toEqual({ a: 1, b: 2, c: 1 });
    expect(readCheckpoint(home, 'midnode').nodes.b!.attempts.map((a) => a.state)).toEqual(['lost', 'succeeded']);
  });

  it('a host killed during the grace of a graceful stop still takes its programs with it', async () => {
    const home = makeHome({ killGraceMs: 3000 });
    const dir = tempDir();
    const pidFile = join(dir, 'stubborn.pid');
    const specPath = writeSpec(dir, { name: 'stubborn', cwd: dir, nodes: [{ id: 'a', kind: 'command', cmd: 'sh', args: ['-c', `trap "" TERM INT; echo $$ > "${pidFile}"; sleep 20`] }] });
    const host = spawnCli(home, ['run', specPath, '--id', 'stub', '--wait']);
    const pid = Number(await waitFor(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').trim(), 'the node'));
    host.kill('SIGTERM'); // what systemd and docker send first…
    await new Promise((r) => setTimeout(r, 300));
    expect(isRunning(pid)).toBe(true); // the program ignores SIGTERM and is inside its grace
    host.kill('SIGKILL'); // …and then, before the grace is over
    await host;
    await waitFor(() => !isRunning(pid), 'the program to die with its host', 3000);
  });

  it('a node the router skipped is not run by a resume (the cursor, not the first pending node)', async () => {
    const home = makeHome();
    const dir = tempDir();
    const mark = join(dir, 'marks');
    const specPath = writeSpec(dir, {
      name: 'skip',
      cwd: dir,
      nodes: [markNode('a', mark), { id: 'r', kind: 'router', routes: [{ when: { type: 'always' }, to: 'c' }] }, markNode('b', mark), markNode('c', mark, 0.3)],
    });
    const crashed = await cli(home, ['run', specPath, '--id', 'skipper', '--wait'], { env: { RUNWARDEN_FAILPOINTS: 'kernel.before-result-commit:c' } });
    expect(crashed.exitCode).not.toBe(0);
    const resumed = await cli(home, ['resume', 'skipper', '--wait']);
    expect(resumed.exitCode, resumed.stderr).toBe(0);
    assertConsistent(home, 'skipper');
    expect(marks(mark)).toEqual({ a: 1, c: 2 });
    expect(readCheckpoint(home, 'skipper').nodes.b!.state).toBe('skipped');
  });

  it('a poison node that kills its host every time fails after maxRequeues instead of looping forever', async () => {
    const home = makeHome({ maxRequeues: 1 });
    const dir = tempDir();
    const mark = join(dir, 'marks');
    const specPath = writeSpec(dir, { name: 'poison', cwd: dir, nodes: [markNode('a', mark)] });
    const env = { RUNWARDEN_FAILPOINTS: 'kernel.after-node-started:a' };
    expect((await cli(home, ['run', specPath, '--id', 'poison', '--wait'], { env })).exitCode).not.toBe(0);
    expect((await cli(home, ['resume', 'poison', '--wait'], { env })).exitCode).not.toBe(0);
    const last = await cli(home, ['resume', 'poison', '--wait'], { env });
    expect(last.exitCode).toBe(1);
    const record = readCheckpoint(home, 'poison');
    expect(record.state).toBe('failed');
    expect(record.error).toMatchObject({ code: 'REQUEUE_LIMIT' });
    assertConsistent(home, 'poison');
  });

  it('SIGTERM (or Ctrl-C, exit 130) interrupts cleanly: the attempt is marked interrupted, the lease released, and resume continues', async () => {
    const home = makeHome();
    const dir = tempDir();
    const mark = join(dir, 'marks');
    const flag = join(dir, 'slept');
    const slowOnce = { id: 'b', kind: 'command', cmd: 'sh', args: ['-c', `echo b >> "${mark}"; if [ ! -f "${flag}" ]; then touch "${flag}"; sleep 30; fi`] };
    const specPath = writeSpec(dir, { name: 'interrupt', cwd: dir, nodes: [markNode('a', mark), slowOnce, markNode('c', mark)] });
    const host = spawnCli(home, ['run', specPath, '--id', 'ctrlc', '--wait']);
    await waitFor(() => marks(mark).b === 1, 'node b to start');
    host.kill('SIGTERM');
    const result = await host;
    expect(result.exitCode).toBe(143);
    const record = readCheckpoint(home, 'ctrlc');
    expect(record.nodes.b!.attempts.map((a) => a.state)).toEqual(['interrupted']);
    expect(existsSync(join(home, 'runs/ctrlc/lease.json'))).toBe(false);
    // Resume does not count an interruption as a re-queue.
    const resumed = await cli(home, ['resume', 'ctrlc', '--wait']);
    expect(resumed.exitCode).toBe(0);
    const events = assertConsistent(home, 'ctrlc');
    expect(events.find((e) => e.type === 'node_started' && e.node === 'b' && e.attempt === 2)).toMatchObject({ cause: 'resume' });
    expect(marks(mark)).toEqual({ a: 1, b: 2, c: 1 });
  });
});
