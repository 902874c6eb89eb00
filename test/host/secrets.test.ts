import { createHash } from 'node:crypto';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { assertConsistent, cli, makeHome, readCheckpoint, tempDir, writeSpec } from '../helpers/cli.js';

const SECRET = 'sk-test-7f3c9a1e-never-store-me';
const SECRET_SHA = createHash('sha256').update(SECRET).digest('hex');
/** A shell test that the engine received the secret, without the secret appearing in the spec. */
const HAS_SECRET = `[ "$(printf %s "$API_TOKEN" | sha256sum | cut -d' ' -f1)" = "${SECRET_SHA}" ]`;

/** Every file under `dir`, recursively. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

function filesContaining(dir: string, needle: string): string[] {
  return filesUnder(dir).filter((f) => readFileSync(f).includes(needle));
}

describe('custom-engine env is a secret', () => {
  it('reaches the engine, never the store, and must be re-supplied on resume', async () => {
    const home = makeHome();
    const dir = tempDir();
    // The engine proves it has the token without printing it.
    const engine = { bin: 'sh', args: ['-c', `${HAS_SECRET} && echo engine-has-token || { echo no-token; exit 3; }`], env: { API_TOKEN: SECRET } };
    const spec = { name: 'secretive', cwd: dir, nodes: [{ id: 'think', kind: 'agent', engine: 'custom', customEngine: engine, prompt: 'hello' }, { id: 'again', kind: 'fanout', prompt: 'hi', agents: [{ name: 'm1', engine: 'custom', customEngine: engine }] }] };
    const specPath = writeSpec(dir, spec);

    const crashed = await cli(home, ['run', specPath, '--id', 'sec', '--wait'], { env: { RUNWARDEN_FAILPOINTS: 'kernel.after-node-started:again' } });
    expect(crashed.exitCode).not.toBe(0);
    expect(readFileSync(join(home, 'runs/sec/nodes/think/a1/output.txt'), 'utf8')).toBe('engine-has-token\n');

    const bare = await cli(home, ['resume', 'sec', '--wait']);
    expect(bare.exitCode).toBe(2);
    expect(bare.stderr).toContain('SECRETS_REQUIRED');
    expect(bare.stderr).toContain("agent 'think' (env API_TOKEN)");
    expect(bare.stderr).toContain("fan-out 'again' member 'm1' (env API_TOKEN)");

    const other = writeSpec(dir, { ...spec, nodes: [spec.nodes[0]] }, 'other.json');
    const mismatch = await cli(home, ['resume', 'sec', '--wait', '--spec', other]);
    expect(mismatch.exitCode).toBe(2);
    expect(mismatch.stderr).toContain('SPEC_MISMATCH');

    const resumed = await cli(home, ['resume', 'sec', '--wait', '--spec', specPath]);
    expect(resumed.exitCode, resumed.stdout + resumed.stderr).toBe(0);
    expect(readCheckpoint(home, 'sec').state).toBe('completed');
    assertConsistent(home, 'sec');

    expect(filesContaining(home, SECRET)).toEqual([]);
    const stored = JSON.parse(readFileSync(join(home, 'runs/sec/spec.json'), 'utf8'));
    expect(stored.nodes[0].customEngine).toEqual({ bin: 'sh', args: engine.args, promptVia: 'arg' });
  });

  it('a background run gets its secrets over IPC, not through any file', async () => {
    const home = makeHome();
    const dir = tempDir();
    const engine = { bin: 'sh', args: ['-c', `${HAS_SECRET} && echo ok`], env: { API_TOKEN: SECRET } };
    const specPath = writeSpec(dir, { name: 'bg-secret', cwd: dir, nodes: [{ id: 'think', kind: 'agent', engine: 'custom', customEngine: engine, prompt: 'x' }] });
    const started = await cli(home, ['run', specPath, '--id', 'bgs', '--json']);
    expect(started.exitCode, started.stderr).toBe(0);
    expect(JSON.parse(started.stdout)).toMatchObject({ runId: 'bgs' });
    const followed = await cli(home, ['events', 'bgs', '--follow', '--json']);
    const last = followed.stdout.trim().split('\n').map((l) => JSON.parse(l)).at(-1);
    expect(last).toMatchObject({ type: 'run_state', state: 'completed' });
    expect(filesContaining(home, SECRET)).toEqual([]);
  });
});
