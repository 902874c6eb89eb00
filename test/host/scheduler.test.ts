import { setMaxListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { Scheduler } from '../../src/host/scheduler.js';

const never = new AbortController().signal;
setMaxListeners(0, never); // one signal shared by many waiters, as a run's is by its fan-out members

describe('Scheduler', () => {
  it('serves waiting runs round-robin: a run with many executions does not starve the others', async () => {
    const scheduler = new Scheduler(2);
    const order: string[] = [];
    const held: Array<() => void> = [];
    const want = (runId: string, n: number) =>
      Array.from({ length: n }, () =>
        scheduler.acquire(runId, never).then((release) => {
          order.push(runId);
          held.push(release);
        }),
      );
    const all = [...want('big', 100), ...want('a', 1), ...want('b', 1), ...want('c', 1)];
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual(['big', 'big']);
    // Each freed slot goes to the next run in turn.
    for (let i = 0; i < 6; i++) {
      held.shift()!();
      await new Promise((r) => setImmediate(r));
    }
    // Freed slots go round the runs: nobody waits behind the 98 queued executions of 'big'.
    expect(order.slice(2, 8)).toEqual(['big', 'a', 'b', 'c', 'big', 'big']);
    while (held.length > 0) {
      held.shift()!();
      await new Promise((r) => setImmediate(r));
    }
    await Promise.all(all);
    expect(order).toHaveLength(103);
  });

  it('bounds one run at maxPerRun while others use the free slots', async () => {
    const scheduler = new Scheduler(4, 1);
    const granted: string[] = [];
    for (const runId of ['x', 'x', 'x', 'y', 'z']) void scheduler.acquire(runId, never).then(() => granted.push(runId));
    await new Promise((r) => setImmediate(r));
    expect(granted.sort()).toEqual(['x', 'y', 'z']);
    expect(scheduler.stats()).toEqual({ running: 3, queued: 2 });
  });

  it('a waiter whose signal aborts leaves the queue', async () => {
    const scheduler = new Scheduler(1);
    const first = await scheduler.acquire('a', never);
    const abort = new AbortController();
    const waiting = scheduler.acquire('b', abort.signal);
    abort.abort('cancelled');
    await expect(waiting).rejects.toBe('cancelled');
    expect(scheduler.stats()).toEqual({ running: 1, queued: 0 });
    first();
    expect(scheduler.stats().running).toBe(0);
  });
});

describe('fair dispatch across runs (real workers)', () => {
  it('a run with 40 fan-out members does not starve five one-node runs', async () => {
    const { Host } = await import('../../src/host/host.js');
    const { makeHome, tempDir } = await import('../helpers/cli.js');
    const host = await Host.open({ home: makeHome(), logger: false, maxConcurrent: 2 });
    try {
      const dir = tempDir();
      const member = (i: number) => ({ name: `m${i}`, engine: 'custom', customEngine: { bin: 'sleep', args: ['0.1'], promptVia: 'stdin' } });
      const wide = await host.start({ spec: { name: 'wide', cwd: dir, nodes: [{ id: 'fan', kind: 'fanout', prompt: 'p', agents: Array.from({ length: 40 }, (_, i) => member(i)) }] } });
      const finished: string[] = [];
      void wide.done.then(() => finished.push('wide'));
      const small = await Promise.all(
        Array.from({ length: 5 }, (_, i) => host.start({ spec: { name: `small-${i}`, cwd: dir, nodes: [{ id: 'a', kind: 'command', cmd: 'true' }] } })),
      );
      await Promise.all(small.map((r, i) => r.done.then(() => finished.push(`small-${i}`))));
      expect((await wide.done).record.state).toBe('completed');
      expect(finished.indexOf('wide')).toBe(5);
    } finally {
      await host.close();
    }
  });
});
