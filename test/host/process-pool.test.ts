import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/host/logger.js';
import type { ExecutionRequest } from '../../src/host/pool/execution.js';
import { ProcessPool } from '../../src/host/pool/process-pool.js';
import { isRunning } from '../../src/util/process-tree.js';
import { ROOT, tempDir } from '../helpers/cli.js';

function pool(entry: string, extra: Partial<ConstructorParameters<typeof ProcessPool>[0]> = {}): ProcessPool {
  return new ProcessPool({
    workerEntry: entry.startsWith('/') ? entry : join(ROOT, 'test/fixtures', entry),
    heartbeatMs: 50,
    heartbeatTimeoutMs: 600,
    killGraceMs: 300,
    idleMs: 5000,
    startTimeoutMs: 5000,
    recycleAfter: 100,
    minWarm: 0,
    sampleMs: 500,
    logger: silentLogger(),
    ...extra,
  });
}

const task = { kind: 'command' as const, cmd: 'true', args: [], cwd: '/' };
const worker = { key: 'test', env: { PATH: process.env.PATH ?? '' }, programEnv: {}, execArgv: [] };
const request = (id: string, signal = new AbortController().signal): ExecutionRequest => ({
  executionId: id,
  fence: 7,
  task,
  worker,
  commands: ['*'],
  limits: { execution: {}, run: {}, runUsed: { wallMs: 0, cpuMs: 0, rssMb: 0, tokens: 0, costUsd: 0 } },
  timeoutMs: 10_000,
  signal,
});

describe('ProcessPool against fake workers', () => {
  it('refuses a late result from a worker whose claim was lost to silence', async () => {
    const p = pool('worker-late.mjs');
    const outcome = await p.execute(request('r/late/a1'));
    expect(outcome).toMatchObject({ status: 'lost', reason: 'heartbeat_timeout' });
    expect(p.stats().refusedMessages).toBe(1);
    expect(p.stats().lostClaims).toBe(1);
    expect(isRunning(outcome.workerPid!)).toBe(false);
    await p.close();
  });

  it('treats a worker that exits with code 0 while holding an execution as lost', async () => {
    const p = pool('worker-exit-zero.mjs');
    const outcome = await p.execute(request('r/zero/a1'));
    expect(outcome).toMatchObject({ status: 'lost', reason: 'worker_lost' });
    expect(outcome.status === 'lost' && outcome.message).toContain('exited with code 0');
    await p.close();
  });

  it('settles the claim of a crashing worker and keeps its last words', async () => {
    const p = pool('worker-crash.mjs');
    const outcome = await p.execute(request('r/crash/a1'));
    expect(outcome).toMatchObject({ status: 'lost', reason: 'worker_lost' });
    expect(outcome.status === 'lost' && outcome.message).toContain('worker-crash fixture');
    await p.close();
  });

  it('accepts one result per claim and refuses duplicates, strangers, stale fences and malformed messages', async () => {
    const p = pool('worker-rogue.mjs');
    const outcome = await p.execute(request('r/rogue/a1'));
    expect(outcome).toMatchObject({ status: 'ok', result: { output: 'first' } });
    await new Promise((r) => setTimeout(r, 300));
    expect(p.stats().refusedMessages).toBe(4);
    await p.close();
  });

  it('runs real executions on the real worker, reuses warm workers, and aborts on request', async () => {
    const p = pool(join(ROOT, 'dist/worker/main.js'));
    const cwd = tempDir();
    for (let i = 0; i < 5; i++) {
      const outcome = await p.execute({ ...request(`r/echo/a${i}`), task: { kind: 'command', cmd: 'sh', args: ['-c', `echo run-${i}`], cwd } });
      expect(outcome).toMatchObject({ status: 'ok', result: { output: `run-${i}\n` } });
    }
    expect(p.stats().workersStarted).toBe(1);
    const abort = new AbortController();
    const pending = p.execute({ ...request('r/long/a1', abort.signal), task: { kind: 'command', cmd: 'sleep', args: ['30'], cwd } });
    setTimeout(() => abort.abort('cancel'), 200);
    const aborted = await pending;
    expect(aborted).toMatchObject({ status: 'aborted', reason: 'cancel' });
    expect(isRunning(aborted.workerPid!)).toBe(false);
    const timedOut = await p.execute({ ...request('r/slow/a1'), timeoutMs: 200, task: { kind: 'command', cmd: 'sleep', args: ['30'], cwd } });
    expect(timedOut.status).toBe('timeout');
    await p.close();
    expect(p.stats().workersAlive).toBe(0);
  });
});
