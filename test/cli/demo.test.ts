import { describe, expect, it } from 'vitest';
import type { RunEvent } from '../../src/protocol/events.js';
import { assertConsistent, cli, makeHome, tempDir } from '../helpers/cli.js';

describe('runwarden demo', () => {
  it('repairs the demo project until its real tests pass: completed, verified — and works twice', async () => {
    const home = makeHome();
    for (let i = 0; i < 2; i++) {
      const dir = tempDir('rw-demo-');
      const result = await cli(home, ['demo', '--dir', dir, '--json']);
      expect(result.exitCode, result.stderr).toBe(0);
      const events = result.stdout.trim().split('\n').map((l) => JSON.parse(l) as RunEvent);
      const runId = events[0]!.type === 'run_created' ? events[0]!.runId : '';
      expect(events.at(-1)).toMatchObject({ type: 'run_state', state: 'completed', outcome: 'verified' });
      // The loop went round: the first verdict failed, the second passed.
      expect(events.filter((e) => e.type === 'evidence').map((e) => e.type === 'evidence' && e.passed)).toEqual([false, true]);
      expect(events.filter((e) => e.type === 'node_started' && e.node === 'fix')).toHaveLength(2);
      assertConsistent(home, runId);
    }
    const human = await cli(home, ['demo']);
    expect(human.exitCode).toBe(0);
    expect(human.stdout).toMatch(/run run-\S+ completed · verified/);
    expect(human.stdout).toMatch(/evidence: \S+\/evidence\/verify-v02-a02/);
  });
});
