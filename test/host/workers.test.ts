import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isRunning } from '../../src/util/process-tree.js';
import { assertConsistent, cli, makeHome, readCheckpoint, spawnCli, tempDir, waitFor, writeSpec } from '../helpers/cli.js';

const read = (path: string): string => (existsSync(path) ? readFileSync(path, 'utf8').trim() : '');

/**
 * Shell test for "process $1 still runs". A zombie does not count: where PID 1
 * does not reap orphans (some containers), a killed orphan stays a zombie, and
 * `kill -0` alone would call it alive.
 */
const RUNS = 'runs() { s=$(ps -o stat= -p "$1" 2>/dev/null); case "$s" in ""|Z*) return 1;; *) return 0;; esac; }';

/**
 * A node that, on its first attempt, records its worker's pid ($PPID: the worker
 * starts the shell) and its own pid, then sleeps; later attempts record whether
 * the first attempt's processes are still alive, then finish at once.
 */
function stallingNode(dir: string): Record<string, unknown> {
  const script = [
    RUNS,
    `if [ ! -f "${dir}/first" ]; then`,
    `  touch "${dir}/first"; echo $PPID > "${dir}/worker.pid"; echo $$ > "${dir}/shell.pid"; sleep 30`,
    'else',
    `  if runs $(cat "${dir}/worker.pid"); then echo worker-alive >> "${dir}/report"; else echo worker-gone >> "${dir}/report"; fi`,
    `  if runs $(cat "${dir}/shell.pid"); then echo shell-alive >> "${dir}/report"; else echo shell-gone >> "${dir}/report"; fi`,
    'fi',
  ].join('\n');
  return { id: 'w', kind: 'command', cmd: 'sh', args: ['-c', script] };
}

describe('lost workers', () => {
  it('a worker SIGKILLed mid-execution: the claim is re-queued and the run finishes', async () => {
    const home = makeHome();
    const dir = tempDir();
    const spec = writeSpec(dir, { name: 'worker-kill', cwd: dir, nodes: [stallingNode(dir)] });
    const run = spawnCli(home, ['run', spec, '--id', 'wk', '--wait']);
    const workerPid = Number(await waitFor(() => read(join(dir, 'worker.pid')), 'the first attempt'));
    process.kill(workerPid, 'SIGKILL');
    const result = await run;
    expect(result.exitCode, String(result.stdout)).toBe(0);
    const events = assertConsistent(home, 'wk');
    expect(events.filter((e) => e.type === 'node_requeued')).toMatchObject([{ node: 'w', attempt: 1, reason: 'worker_lost', error: { code: 'WORKER_LOST' } }]);
    // The killed worker's program (same process group) was stopped before the new attempt started.
    expect(read(join(dir, 'report')).split('\n')).toEqual(['worker-gone', 'shell-gone']);
    expect(readCheckpoint(home, 'wk').nodes.w!.attempts.map((a) => a.state)).toEqual(['lost', 'succeeded']);
  });

  it('a worker that stops heartbeating (SIGSTOP) is detected, killed before the new attempt starts, and replaced', async () => {
    const home = makeHome({ heartbeatMs: 100, heartbeatTimeoutMs: 1000, killGraceMs: 300 });
    const dir = tempDir();
    const spec = writeSpec(dir, { name: 'worker-stall', cwd: dir, nodes: [stallingNode(dir)] });
    const run = spawnCli(home, ['run', spec, '--id', 'ws', '--wait']);
    const workerPid = Number(await waitFor(() => read(join(dir, 'worker.pid')), 'the first attempt'));
    process.kill(workerPid, 'SIGSTOP');
    const result = await run;
    expect(result.exitCode, String(result.stdout)).toBe(0);
    const events = assertConsistent(home, 'ws');
    expect(events.filter((e) => e.type === 'node_requeued')).toMatchObject([{ node: 'w', reason: 'heartbeat_timeout', error: { code: 'HEARTBEAT_TIMEOUT' } }]);
    expect(read(join(dir, 'report')).split('\n')).toEqual(['worker-gone', 'shell-gone']);
    expect(isRunning(workerPid)).toBe(false);
  });

  it('timeoutMs kills the whole process tree, and the retry starts only after it is gone', async () => {
    const home = makeHome();
    const dir = tempDir();
    // Each attempt leaves a background grandchild; the next attempt reports whether the previous one survived.
    const script = [
      RUNS,
      `if [ -f "${dir}/child.pid" ] && runs $(cat "${dir}/child.pid"); then echo previous-alive >> "${dir}/report"; else echo previous-gone >> "${dir}/report"; fi`,
      `sleep 30 & echo $! > "${dir}/child.pid"`,
      'wait',
    ].join('\n');
    const spec = writeSpec(dir, { name: 'timeouts', cwd: dir, nodes: [{ id: 't', kind: 'command', cmd: 'sh', args: ['-c', script], timeoutMs: 400, retry: { max: 1, backoffMs: 0 } }] });
    const result = await cli(home, ['run', spec, '--id', 'to', '--wait']);
    expect(result.exitCode).toBe(1);
    const record = readCheckpoint(home, 'to');
    expect(record.state).toBe('failed');
    expect(record.error).toMatchObject({ code: 'TIMEOUT', node: 't' });
    expect(record.nodes.t!.attempts.map((a) => [a.state, a.error?.code])).toEqual([
      ['failed', 'TIMEOUT'],
      ['failed', 'TIMEOUT'],
    ]);
    expect(read(join(dir, 'report')).split('\n')).toEqual(['previous-gone', 'previous-gone']);
    expect(isRunning(Number(read(join(dir, 'child.pid'))))).toBe(false);
    assertConsistent(home, 'to');
  });
});
