import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BIN, cli, makeHome, readEvents, tempDir, waitFor, writeSpec } from '../helpers/cli.js';

const ok = { name: 'ok', nodes: [{ id: 'a', kind: 'command', cmd: 'true' }] };

/** What a home holds besides the config the test wrote. */
function written(home: string): string[] {
  return readdirSync(home).filter((n) => n !== 'config.json');
}

describe('bad input is refused with the field named, and writes nothing', () => {
  const cases: Array<[string, unknown, RegExp]> = [
    ['an unknown kind', { name: 'x', nodes: [{ id: 'a', kind: 'teleport' }] }, /nodes\[0\]\.kind: unknown node kind/],
    ['an unknown field', { name: 'x', nodes: [{ id: 'a', kind: 'command', cmd: 'true', shell: true }] }, /nodes\[0\]\.shell: unknown field/],
    ['a route to a missing node', { name: 'x', nodes: [{ id: 'r', kind: 'router', routes: [{ when: { type: 'always' }, to: 'ghost' }] }] }, /nodes\[0\]\.routes\[0\]\.to: route target 'ghost'/],
    ['an expression string in when', { name: 'x', nodes: [{ id: 'r', kind: 'router', routes: [{ when: "node('a').failed", to: 'r' }] }] }, /nodes\[0\]\.routes\[0\]\.when: expected a condition object/],
    ['empty nodes', { name: 'x', nodes: [] }, /nodes: a workflow needs at least one node/],
    ['a cwd that does not exist', { name: 'x', cwd: '/definitely/not/here', nodes: [{ id: 'a', kind: 'command', cmd: 'true' }] }, /cwd: does not exist/],
  ];
  for (const [what, spec, message] of cases) {
    it(what, async () => {
      const home = makeHome();
      const result = await cli(home, ['run', writeSpec(tempDir(), spec), '--wait']);
      expect(result.exitCode).toBe(2);
      expect(result.stderr).toMatch(/error \[SPEC_INVALID\]/);
      expect(result.stderr).toMatch(message);
      expect(written(home)).toEqual([]);
    });
  }

  it('a run id with a path in it', async () => {
    const home = makeHome();
    for (const args of [['--wait'], []]) {
      const result = await cli(home, ['run', writeSpec(tempDir(), ok), '--id', '../x', ...args]);
      expect(result.exitCode).toBe(2);
      expect(result.stderr).toContain("RUN_ID_INVALID]: --id: must not contain '..'");
    }
    expect(written(home)).toEqual([]);
    expect(existsSync(join(home, '..', 'x'))).toBe(false);
  });

  it('a spec file that is missing or not JSON, and unknown flags', async () => {
    const home = makeHome();
    const dir = tempDir();
    expect((await cli(home, ['run', join(dir, 'nope.json')])).stderr).toMatch(/SPEC_INVALID.*\n.*cannot read .*nope\.json: ENOENT/);
    const notJson = join(dir, 'bad.json');
    await import('node:fs').then((fs) => fs.writeFileSync(notJson, '{ nope'));
    expect((await cli(home, ['run', notJson])).stderr).toContain('not valid JSON');
    const flag = await cli(home, ['run', notJson, '--frobnicate']);
    expect(flag.exitCode).toBe(2);
    expect(flag.stderr).toContain("unknown option '--frobnicate'");
    expect(written(home)).toEqual([]);
  });

  it('starting an id that exists is refused, clearly', async () => {
    const home = makeHome();
    const spec = writeSpec(tempDir(), ok);
    expect((await cli(home, ['run', spec, '--id', 'dup', '--wait'])).exitCode).toBe(0);
    const again = await cli(home, ['run', spec, '--id', 'dup', '--wait']);
    expect(again.exitCode).toBe(2);
    expect(again.stderr).toContain('RUN_EXISTS]: run dup already exists');
    const json = await cli(home, ['run', spec, '--id', 'dup', '--wait', '--json']);
    expect(JSON.parse(json.stdout)).toEqual({ error: { code: 'RUN_EXISTS', message: expect.any(String), field: 'runId' } });
  });

  it('a bad config.json names the file and the field', async () => {
    const home = makeHome({ heartbeatMs: 5 } as never);
    const result = await cli(home, ['list']);
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toMatch(/CONFIG_INVALID.*config\.json is invalid:\n\s+heartbeatMs:/);
    const crossed = await cli(makeHome({ leaseRenewMs: 5000, leaseTtlMs: 1000 }), ['list']);
    expect(crossed.exitCode).toBe(2);
    expect(crossed.stderr).toMatch(/config\.json is invalid:\n\s+leaseRenewMs: must be less than leaseTtlMs/);
  });

  it('demo --dir refuses a directory that is not empty, and touches nothing in it', async () => {
    const home = makeHome();
    const dir = tempDir();
    await import('node:fs').then((fs) => fs.writeFileSync(join(dir, 'notes.txt'), 'mine'));
    const result = await cli(home, ['demo', '--dir', dir]);
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toContain('OPTION_INVALID]: --dir');
    expect(readdirSync(dir)).toEqual(['notes.txt']);
  });
});

describe('the read commands', () => {
  it('show --json gives the record with state, outcome, error, usage and per-node attempts', async () => {
    const home = makeHome();
    const spec = writeSpec(tempDir(), { name: 'two', nodes: [{ id: 'a', kind: 'command', cmd: 'true' }, { id: 'b', kind: 'command', cmd: 'false' }] });
    const run = await cli(home, ['run', spec, '--id', 'shown', '--wait']);
    expect(run.exitCode).toBe(1);
    const shown = JSON.parse((await cli(home, ['show', 'shown', '--json'])).stdout);
    expect(shown).toMatchObject({
      runId: 'shown',
      state: 'failed',
      outcome: 'unverified',
      error: { code: 'COMMAND_FAILED', node: 'b' },
      usage: { executions: 2 },
      nodes: {
        a: { state: 'succeeded', attempts: [{ executions: ['shown/a/a1'], state: 'succeeded' }] },
        b: { state: 'failed', attempts: [{ executions: ['shown/b/a1'], state: 'failed', error: { code: 'COMMAND_FAILED' } }] },
      },
      owner: null,
    });
    const human = await cli(home, ['show', 'shown']);
    expect(human.stdout).toMatch(/state\s+failed · unverified/);
    const events = await cli(home, ['events', 'shown', '--json']);
    expect(events.stdout.trim().split('\n').map((l) => JSON.parse(l).seq)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    const missing = await cli(home, ['show', 'ghost']);
    expect(missing.exitCode).toBe(2);
    expect(missing.stderr).toContain('RUN_NOT_FOUND');
  });

  it('a reader that stops early (| head) gets no stack trace', async () => {
    const home = makeHome();
    const spec = writeSpec(tempDir(), ok);
    expect((await cli(home, ['run', spec, '--id', 'piped', '--wait'])).exitCode).toBe(0);
    const { execa } = await import('execa');
    const piped = await execa('sh', ['-c', `"${process.execPath}" "${BIN}" show piped --spec | head -c 1`], { env: { RUNWARDEN_HOME: home }, reject: false });
    expect(piped.stdout).toBe('{');
    expect(piped.stderr).toBe('');
  });

  it('events --follow ends with the run (exit 0 completed, 1 otherwise), and says so when nobody drives the run', async () => {
    const home = makeHome();
    const dir = tempDir();
    const failing = writeSpec(dir, { name: 'fails', nodes: [{ id: 'a', kind: 'command', cmd: 'false' }] }, 'fails.json');
    expect((await cli(home, ['run', failing, '--id', 'ef', '--wait'])).exitCode).toBe(1);
    expect((await cli(home, ['events', 'ef', '--follow'])).exitCode).toBe(1);
    const slow = writeSpec(dir, { name: 'slow', nodes: [{ id: 'a', kind: 'command', cmd: 'sleep', args: ['30'] }] }, 'slow.json');
    const started = JSON.parse((await cli(home, ['run', slow, '--id', 'orphan', '--json'])).stdout) as { pid: number };
    await waitFor(() => readEvents(home, 'orphan').some((e) => e.type === 'node_started'), 'the node to start');
    process.kill(started.pid, 'SIGKILL');
    const followed = await cli(home, ['events', 'orphan', '--follow'], { timeoutMs: 15_000 });
    expect(followed.exitCode).toBe(1);
    expect(followed.stderr).toContain('no process is driving run orphan (running); continue it with: runwarden resume orphan');
  });

  it('--help helps', async () => {
    const result = await cli(makeHome(), ['--help']);
    expect(result.exitCode).toBe(0);
    for (const command of ['demo', 'run', 'list', 'show', 'events', 'resume', 'cancel', 'steer', 'approve', 'evidence', 'delete']) expect(result.stdout).toContain(command);
    expect(result.stdout).not.toContain('background-host');
  });
});

describe('a log that cannot be written never takes the host down', () => {
  for (const [what, make] of [
    ['the log path is a directory', (log: string) => import('node:fs').then((fs) => fs.mkdirSync(log))],
    ['the disk is full (the log is /dev/full)', (log: string) => import('node:fs').then((fs) => fs.symlinkSync('/dev/full', log))],
  ] as const) {
    it(what, async () => {
      const home = makeHome();
      await import('node:fs').then((fs) => fs.mkdirSync(join(home, 'logs')));
      await make(join(home, 'logs', 'runwarden.log'));
      const spec = writeSpec(tempDir(), { name: 'logless', nodes: [{ id: 'a', kind: 'command', cmd: 'echo', args: ['hi'] }, { id: 'b', kind: 'command', cmd: 'true' }] });
      const result = await cli(home, ['run', spec, '--id', 'nolog', '--wait'], { timeoutMs: 20_000 });
      expect(result.stderr).toBe('');
      expect(result.exitCode).toBe(0);
      expect((await cli(home, ['list'])).stdout).toContain('nolog');
    });
  }
});
