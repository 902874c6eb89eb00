import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { assertConsistent, cli, makeHome, markNode, marks, readCheckpoint, readEvents, runDir, spawnCli, tempDir, waitFor, writeSpec } from '../helpers/cli.js';

/** Whether this machine lets the tests make a directory immutable (root on ext4 and the like). */
function canChattr(): boolean {
  const dir = mkdtempSync(join(tmpdir(), 'rw-chattr-'));
  try {
    writeFileSync(join(dir, 'f'), '');
    execFileSync('chattr', ['+i', join(dir, 'f')], { stdio: 'ignore' });
    execFileSync('chattr', ['-i', join(dir, 'f')], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const immutable: string[] = [];
afterEach(() => {
  for (const path of immutable.splice(0)) execFileSync('chattr', ['-i', path], { stdio: 'ignore' });
});

describe('store faults', () => {
  it('a write fault that clears is retried and the run goes on', async () => {
    const home = makeHome();
    const dir = tempDir();
    const mark = join(dir, 'marks');
    const spec = writeSpec(dir, { name: 'transient', cwd: dir, nodes: [markNode('a', mark), markNode('b', mark)] });
    const result = await cli(home, ['run', spec, '--id', 'tr', '--wait'], { env: { RUNWARDEN_FAILPOINTS: 'commit.before-stage=enospc@3' } });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(marks(mark)).toEqual({ a: 1, b: 1 });
    assertConsistent(home, 'tr');
  });

  it('a fault that lasts stops the run with STORE_BLOCKED, intact, and resume finishes it once the fault clears', async () => {
    const home = makeHome({ storeRetryMs: 300 });
    const dir = tempDir();
    const mark = join(dir, 'marks');
    const spec = writeSpec(dir, { name: 'full-disk', cwd: dir, nodes: [markNode('a', mark), markNode('b', mark)] });
    const result = await cli(home, ['run', spec, '--id', 'fd', '--wait'], { env: { RUNWARDEN_FAILPOINTS: 'commit.before-stage=enospc@4+' } });
    expect(result.exitCode).toBe(1);
    expect(result.stderr).toMatch(/error \[STORE_BLOCKED\]: run fd: the store refused the write/);
    expect(result.stdout).toContain('the run is not finished (blocked); continue it with: runwarden resume fd');
    assertConsistent(home, 'fd');
    expect(readCheckpoint(home, 'fd').state).toBe('running');
    const resumed = await cli(home, ['resume', 'fd', '--wait']);
    expect(resumed.exitCode, resumed.stderr).toBe(0);
    assertConsistent(home, 'fd');
    expect(marks(mark).b).toBe(1);
  });

  it.skipIf(!canChattr())('a read-only run directory: writes report STORE_BLOCKED, reads still work, and the run resumes afterwards', async () => {
    const home = makeHome({ storeRetryMs: 500 });
    const dir = tempDir();
    const mark = join(dir, 'marks');
    const spec = writeSpec(dir, { name: 'read-only', cwd: dir, nodes: [markNode('a', mark, 1), markNode('b', mark)] });
    const run = spawnCli(home, ['run', spec, '--id', 'ro', '--wait']);
    await waitFor(() => readEvents(home, 'ro').some((e) => e.type === 'node_started' && e.node === 'a'), 'node a');
    execFileSync('chattr', ['+i', runDir(home, 'ro')]);
    immutable.push(runDir(home, 'ro'));
    const stopped = await run;
    expect(stopped.exitCode).toBe(1);
    expect(String(stopped.stderr)).toContain('STORE_BLOCKED');
    const shown = await cli(home, ['show', 'ro', '--json']);
    expect(shown.exitCode, shown.stderr).toBe(0);
    expect((await cli(home, ['list'])).stdout).toContain('ro ');
    const cancel = await cli(home, ['cancel', 'ro']);
    expect(cancel.exitCode).toBe(1);
    expect(cancel.stderr).toMatch(/^error \[STORE_BLOCKED\]: cannot queue a cancel request for run ro: EPERM/m);
    expect(cancel.stderr).not.toContain('    at ');
    execFileSync('chattr', ['-i', runDir(home, 'ro')]);
    immutable.pop();
    const resumed = await cli(home, ['resume', 'ro', '--wait']);
    expect(resumed.exitCode, resumed.stderr).toBe(0);
    assertConsistent(home, 'ro');
  });
});
