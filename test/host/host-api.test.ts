import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Host } from '../../src/host/host.js';
import { currentOwner } from '../../src/store/liveness.js';
import { makeHome, tempDir } from '../helpers/cli.js';

describe('Host (library API)', () => {
  it('starts a run and reports it through events and done', async () => {
    const host = await Host.open({ home: makeHome(), logger: false });
    try {
      const run = await host.start({ spec: { name: 'hello', cwd: tempDir(), nodes: [{ id: 'hi', kind: 'command', cmd: 'echo', args: ['hi'] }] }, runId: 'api-1' });
      const seen: string[] = [];
      run.listen({ event: (e) => seen.push(e.type) });
      const { record } = await run.done;
      expect(record).toMatchObject({ state: 'completed', outcome: 'unverified', outcomeReason: 'the workflow has no contract' });
      expect(seen).toContain('node_succeeded');
      await expect(host.start({ spec: { name: 'x', nodes: [] } })).rejects.toMatchObject({ code: 'SPEC_INVALID', field: 'nodes' });
    } finally {
      await host.close();
    }
  });

  it('refuses bad control arguments before anything is written, and drops inbox entries it did not write', async () => {
    const home = makeHome();
    const host = await Host.open({ home, logger: false });
    try {
      const run = await host.start({ spec: { name: 'gate', cwd: tempDir(), nodes: [{ id: 'g', kind: 'human_gate', prompt: 'ok?' }] }, runId: 'api-3' });
      await new Promise((r) => setTimeout(r, 200));
      await expect(host.control('api-3', 'approved' as never)).rejects.toMatchObject({ code: 'OPTION_INVALID', field: 'action' });
      await expect(host.control('api-3', 'approve', { text: 123 as never })).rejects.toMatchObject({ code: 'OPTION_INVALID', field: 'text' });
      await expect(host.control('api-3', 'steer', { text: 5 as never })).rejects.toMatchObject({ code: 'OPTION_INVALID', field: 'text' });
      const inbox = join(home, 'runs/api-3/inbox');
      mkdirSync(inbox, { recursive: true });
      writeFileSync(join(inbox, '000000000000001-forged.json'), JSON.stringify({ id: 'forged', action: 'approved', at: 'now', from: { pid: 1, host: 'h' } }));
      await new Promise((r) => setTimeout(r, 500));
      expect(readdirSync(inbox)).toEqual([]);
      expect(run.record.state).toBe('awaiting_human');
      await host.control('api-3', 'approve');
      expect((await run.done).record.state).toBe('completed');
      const events = await host.store.readEvents('api-3');
      expect(events.filter((e) => e.type === 'control')).toHaveLength(1);
    } finally {
      await host.close();
    }
  });

  it('a resume waits out a lease held only for a moment to apply a control request', async () => {
    const home = makeHome();
    const a = await Host.open({ home, logger: false });
    const b = await Host.open({ home, logger: false });
    try {
      const run = await a.start({ spec: { name: 'gate', cwd: tempDir(), nodes: [{ id: 'g', kind: 'human_gate', prompt: 'ok?' }] }, runId: 'api-2' });
      await new Promise((r) => setTimeout(r, 300));
      await a.close();
      expect((await run.done).stopped).toBe('interrupt');
      // Another process applies a control request: it holds the lease for a moment.
      const held = await a.store.acquire('api-2', currentOwner('owner-control'), { purpose: 'control' });
      expect(held.status).toBe('acquired');
      setTimeout(() => void (held.status === 'acquired' && a.store.release(held.guard)), 400);
      const resumed = await b.resume('api-2');
      expect(resumed.record.state).toBe('awaiting_human');
      await b.control('api-2', 'approve');
      expect((await resumed.done).record).toMatchObject({ state: 'completed' });
    } finally {
      await b.close();
    }
  });
});
