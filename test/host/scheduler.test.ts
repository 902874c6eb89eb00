import { setMaxListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { Host } from '../../src/host/host.js';
import { Scheduler } from '../../src/host/scheduler.js';
import { makeHome, readEvents, tempDir, waitFor } from '../helpers/cli.js';

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
    expect(scheduler.stats()).toEqual({ running: 3, queued: 2, preempted: 0 });
  });

  it('a waiter whose signal aborts leaves the queue', async () => {
    const scheduler = new Scheduler(1);
    const first = await scheduler.acquire('a', never);
    const abort = new AbortController();
    const waiting = scheduler.acquire('b', abort.signal);
    abort.abort('cancelled');
    await expect(waiting).rejects.toBe('cancelled');
    expect(scheduler.stats()).toEqual({ running: 1, queued: 0, preempted: 0 });
    first();
    expect(scheduler.stats().running).toBe(0);
  });
});

describe('Scheduler: priorities and preemption', () => {
  const tick = () => new Promise((r) => setImmediate(r));

  it('serves foreground waiters before background ones', async () => {
    const scheduler = new Scheduler(1);
    const first = await scheduler.acquire('x', never);
    const order: string[] = [];
    const bg = scheduler.acquire('bg', never, { priority: 'background' }).then((r) => (order.push('bg'), r));
    const fg = scheduler.acquire('fg', never).then((r) => (order.push('fg'), r));
    await tick();
    first();
    (await fg)();
    (await bg)();
    expect(order).toEqual(['fg', 'bg']);
  });

  it('asks the newest background holder for its slot, once, and only as many as foreground waiters need', async () => {
    const scheduler = new Scheduler(3);
    const asked: string[] = [];
    const hold = (name: string, priority: 'foreground' | 'background') => scheduler.acquire(name, never, { priority, onPreempt: () => asked.push(name) });
    await hold('bg-old', 'background');
    const newest = await hold('bg-new', 'background');
    await hold('fg-holder', 'foreground');
    const waiting = scheduler.acquire('fg-waiter', never);
    await tick();
    expect(asked).toEqual(['bg-new']);
    // Another drain before the slot comes back asks nobody else.
    const more = new AbortController();
    const queued = scheduler.acquire('bg-more', more.signal, { priority: 'background' });
    await tick();
    expect(asked).toEqual(['bg-new']);
    newest(); // the preempted execution stopped and gave its slot back
    const release = await waiting;
    expect(scheduler.stats()).toMatchObject({ running: 3, queued: 1, preempted: 1 });
    more.abort('done');
    await expect(queued).rejects.toBe('done');
    release();
  });

  it('never preempts foreground holders or holders without onPreempt', async () => {
    const scheduler = new Scheduler(2);
    const asked: string[] = [];
    const a = await scheduler.acquire('fg', never, { onPreempt: () => asked.push('fg') });
    const b = await scheduler.acquire('bg', never, { priority: 'background' });
    const waiting = scheduler.acquire('late', never);
    await tick();
    expect(asked).toEqual([]);
    a();
    (await waiting)();
    b();
  });
});

describe('fair dispatch across runs (real workers)', () => {
  it('a run with 40 fan-out members does not starve five one-node runs', async () => {
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

describe('preemption (real workers)', () => {
  it('a foreground run takes the only slot from a long background run within a second; the background run is re-queued as preempted and completes later', async () => {
    const dir = tempDir();
    const home = makeHome({ maxConcurrent: 1 });
    const host = await Host.open({ home, logger: false });
    try {
      // retry.max 0: a preemption that used a retry would fail this run.
      const background = await host.start({
        spec: { name: 'nightly', cwd: dir, priority: 'background', nodes: [{ id: 'batch', kind: 'command', cmd: 'sh', args: ['-c', 'if [ -e done ]; then exit 0; fi; sleep 30'], retry: { max: 0 } }] },
      });
      await waitFor(async () => (await host.show(background.runId)).record.nodes.batch?.attempts.length === 1, 'the batch to start');
      await new Promise((r) => setTimeout(r, 300)); // the batch is executing
      const foreground = await host.start({ spec: { name: 'person', cwd: dir, nodes: [{ id: 'task', kind: 'command', cmd: 'touch', args: ['done'] }] } });
      expect((await foreground.done).record.state).toBe('completed');
      const fg = readEvents(home, foreground.runId);
      const created = Date.parse(fg.find((e) => e.type === 'run_created')!.ts);
      const ended = Date.parse(fg.find((e) => e.type === 'node_succeeded')!.ts);
      expect(ended - created).toBeLessThan(1000);

      const bg = await background.done;
      expect(bg.record.state).toBe('completed');
      const attempts = bg.record.nodes.batch!.attempts.map((a) => a.state);
      expect(attempts).toEqual(['preempted', 'succeeded']);
      expect(bg.record.nodes.batch!.attempts[1]!.cause).toBe('preempted');
      expect(bg.record.nodes.batch!.retries).toBe(0);
      expect(bg.record.nodes.batch!.requeues).toBe(0);
      const requeued = readEvents(home, background.runId).find((e) => e.type === 'node_requeued');
      expect(requeued).toMatchObject({ reason: 'preempted', error: { code: 'PREEMPTED' } });
    } finally {
      await host.close();
    }
  });
});
