import { createHash } from 'node:crypto';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { assertConsistent, cli, makeHome, readCheckpoint, spawnCli, tempDir, waitFor, writeSpec } from '../helpers/cli.js';
import { daemonFiles } from '../helpers/daemon.js';

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

describe('the CLI with a daemon', () => {
  it('serve --detach, status, commands through the daemon with the same output, stop', async () => {
    const home = makeHome();
    const dir = tempDir();
    expect((await cli(home, ['status'])).exitCode).toBe(1);
    const started = await cli(home, ['serve', '--detach', '--port', '0']);
    expect(started.exitCode, started.stderr).toBe(0);
    expect(started.stdout).toMatch(/daemon started: pid \d+ at http:\/\/127\.0\.0\.1:\d+/);
    const [pid] = daemonFiles(home);
    try {
      const status = await cli(home, ['status']);
      expect(status.exitCode).toBe(0);
      expect(status.stdout).toContain(`daemon pid ${pid}`);
      expect(JSON.parse((await cli(home, ['status', '--json'])).stdout)).toMatchObject({ running: true, daemons: [{ pid, ok: true }] });
      expect((statSync(join(home, 'daemon.token')).mode & 0o777).toString(8)).toBe('600');

      const spec = writeSpec(dir, { name: 'via-daemon', nodes: [{ id: 'hi', kind: 'command', cmd: 'echo', args: ['hello'] }] });
      const viaDaemon = await cli(home, ['run', spec, '--wait', '--id', 'd1'], { cwd: dir });
      expect(viaDaemon.exitCode, viaDaemon.stderr).toBe(0);
      expect(viaDaemon.stderr).toContain('started in the daemon');
      const embedded = await cli(home, ['run', spec, '--wait', '--id', 'e1', '--no-daemon'], { cwd: dir });
      expect(embedded.exitCode).toBe(0);
      const shape = (s: string) => s.replace(/\d\d:\d\d:\d\d/g, 'T').replace(/\(\d+ ms\)|\([\d.]+ s\)/g, '(t)').replaceAll('d1', 'ID').replaceAll('e1', 'ID');
      expect(shape(viaDaemon.stdout)).toBe(shape(embedded.stdout));
      // The run executed in the daemon's process tree, not the CLI's.
      expect(readCheckpoint(home, 'd1').cwd).toBe(dir);

      const background = await cli(home, ['run', spec, '--json'], { cwd: dir });
      const { runId, pid: daemonPid } = JSON.parse(background.stdout) as { runId: string; pid: number };
      expect(daemonPid).toBe(pid);
      const followed = await cli(home, ['events', runId, '--follow']);
      expect(followed.exitCode).toBe(0);
      expect(followed.stdout).toContain('completed');
      const show = await cli(home, ['show', 'd1']);
      expect(show.stdout).toContain('completed · unverified');
      const listed = await cli(home, ['list', '--state', 'completed', '--json']);
      expect((JSON.parse(listed.stdout) as { runs: unknown[] }).runs).toHaveLength(3);
      expect((await cli(home, ['delete', 'e1'])).stdout).toContain('deleted e1');
      const missing = await cli(home, ['show', 'e1']);
      expect(missing.exitCode).toBe(2);
      expect(missing.stderr).toContain('RUN_NOT_FOUND');
      expect((await cli(home, ['list', '--state', 'bogus'])).exitCode).toBe(2);
    } finally {
      const stopped = await cli(home, ['stop']);
      expect(stopped.exitCode, stopped.stderr).toBe(0);
    }
    expect(daemonFiles(home)).toEqual([]);
    expect((await cli(home, ['status'])).exitCode).toBe(1);
  });

  it('Ctrl-C on run --wait through the daemon stops following only: the run completes in the daemon', async () => {
    const home = makeHome();
    const dir = tempDir();
    expect((await cli(home, ['serve', '--detach', '--port', '0'])).exitCode).toBe(0);
    try {
      const spec = writeSpec(dir, { name: 'keeps-going', nodes: [{ id: 'slow', kind: 'command', cmd: 'sh', args: ['-c', 'sleep 1.5; echo done'] }] });
      const following = spawnCli(home, ['run', spec, '--wait', '--id', 'k1'], { cwd: dir });
      await waitFor(() => {
        try {
          return readFileSync(join(home, 'runs/k1/events.jsonl'), 'utf8').includes('node_started');
        } catch {
          return false;
        }
      }, 'the node to start');
      following.kill('SIGINT');
      const result = await following;
      expect(result.exitCode).toBe(130);
      expect(String(result.stderr)).toContain('goes on in the daemon');
      await waitFor(() => readCheckpoint(home, 'k1').state === 'completed', 'the run to complete in the daemon');
      assertConsistent(home, 'k1');
    } finally {
      await cli(home, ['stop']);
    }
  });

  it('a run whose secrets cannot be re-supplied is listed as needs_secrets until resumed with its spec', async () => {
    const home = makeHome({ adoptScanMs: 200 });
    const dir = tempDir();
    const SECRET = 'sk-daemon-test-never-store-me';
    const sha = createHash('sha256').update(SECRET).digest('hex');
    const engine = { bin: 'sh', args: ['-c', `[ "$(printf %s "$API_TOKEN" | sha256sum | cut -d' ' -f1)" = "${sha}" ] && echo ok || exit 3`], env: { API_TOKEN: SECRET } };
    const spec = writeSpec(dir, { name: 'secretive', cwd: dir, nodes: [{ id: 'one', kind: 'command', cmd: 'true' }, { id: 'think', kind: 'agent', engine: 'custom', customEngine: engine, prompt: 'hi' }] });
    const crashed = await cli(home, ['run', spec, '--id', 'sec', '--wait', '--no-daemon'], { env: { RUNWARDEN_FAILPOINTS: 'kernel.after-node-started:think' } });
    expect(crashed.exitCode).not.toBe(0);

    expect((await cli(home, ['serve', '--detach', '--port', '0'])).exitCode).toBe(0);
    try {
      await waitFor(async () => (await cli(home, ['status'])).stdout.includes('sec: needs_secrets'), 'the run to be listed as needs_secrets');
      const status = JSON.parse((await cli(home, ['status', '--json'])).stdout) as { daemons: Array<{ needsSecrets: Array<{ runId: string; message: string }> }> };
      expect(status.daemons[0]!.needsSecrets[0]).toMatchObject({ runId: 'sec' });
      expect(status.daemons[0]!.needsSecrets[0]!.message).toContain('API_TOKEN');
      expect(readCheckpoint(home, 'sec').state).toBe('running');

      const resumed = await cli(home, ['resume', 'sec', '--spec', spec, '--wait']);
      expect(resumed.exitCode, resumed.stderr).toBe(0);
      expect(readCheckpoint(home, 'sec').state).toBe('completed');
      await waitFor(async () => !(await cli(home, ['status'])).stdout.includes('needs_secrets'), 'needs_secrets to clear');
      // The secret crossed HTTP into the daemon's memory, and no file of the store.
      expect(filesUnder(home).filter((f) => readFileSync(f).includes(SECRET))).toEqual([]);
    } finally {
      await cli(home, ['stop']);
    }
  });
});
