import { createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Host } from '../../src/host/host.js';
import { backoffMs } from '../../src/host/delivery/deliverer.js';
import { cli, makeHome, tempDir, waitFor } from '../helpers/cli.js';
import { startDaemon } from '../helpers/daemon.js';

interface Received {
  headers: IncomingMessage['headers'];
  body: string;
}

/** A real HTTP receiver: answers each request with what `answer` says (a status, or 'hang' to never answer). */
async function receiver(answer: (n: number) => number | 'hang', port = 0): Promise<{ url: string; port: number; received: Received[]; close(): Promise<void> }> {
  const received: Received[] = [];
  const hanging = new Set<import('node:http').ServerResponse>();
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      received.push({ headers: req.headers, body });
      const a = answer(received.length);
      if (a === 'hang') hanging.add(res);
      else res.writeHead(a).end();
    });
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  const actual = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${actual}/hook`,
    port: actual,
    received,
    close: () =>
      new Promise((r) => {
        for (const res of hanging) res.destroy();
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const SECRET = 'shh-its-a-secret';
const sign = (body: string): string => `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`;
const quick = (dir: string, name = 'notify') => ({ name, cwd: dir, nodes: [{ id: 'a', kind: 'command', cmd: 'true' }] });

describe('delivery', () => {
  it('a webhook that fails twice receives the event on the third attempt, signed, with one delivery id throughout', async () => {
    const hook = await receiver((n) => (n <= 2 ? 500 : 204));
    const home = makeHome({ delivery: { sinks: [{ name: 'hook', type: 'webhook', url: hook.url, secretEnv: 'RW_TEST_HOOK_SECRET' }], backoffMs: 50, maxBackoffMs: 200, pollMs: 20 } });
    process.env.RW_TEST_HOOK_SECRET = SECRET;
    const host = await Host.open({ home, logger: false });
    try {
      const run = await host.start({ spec: quick(tempDir()) });
      expect((await run.done).record.state).toBe('completed');
      await waitFor(() => hook.received.length === 3, 'three attempts');
      const ids = new Set(hook.received.map((r) => r.headers['x-runwarden-delivery']));
      expect(ids.size).toBe(1);
      for (const r of hook.received) {
        expect(r.headers['x-runwarden-signature']).toBe(sign(r.body));
        expect(r.headers['content-type']).toBe('application/json');
      }
      const last = JSON.parse(hook.received[2]!.body) as { deliveryId: string; kind: string; runId: string; attempt: number; event: { type: string; state: string }; run: { state: string } };
      expect(last).toMatchObject({ kind: 'run.ended', runId: run.runId, attempt: 3, event: { type: 'run_state', state: 'completed' }, run: { state: 'completed' } });
      expect(last.deliveryId).toBe([...ids][0]);
      await waitFor(async () => (await host.deliverer.outbox.counts()).pending === 0, 'the obligation to be settled');
      expect(await host.deliverer.outbox.counts()).toEqual({ pending: 0, inflight: 0, dead: 0 });
    } finally {
      delete process.env.RW_TEST_HOOK_SECRET;
      await host.close();
      await hook.close();
    }
  });

  it('a receiver that never answers lands in the dead letters with the last error; `deliveries retry` sends it again', async () => {
    let answering = false;
    const hook = await receiver(() => (answering ? 200 : 'hang'));
    const home = makeHome({ delivery: { sinks: [{ name: 'silent', type: 'webhook', url: hook.url, timeoutMs: 150 }], maxAttempts: 3, backoffMs: 20, maxBackoffMs: 50, pollMs: 20 } });
    const host = await Host.open({ home, logger: false });
    try {
      const run = await host.start({ spec: quick(tempDir()) });
      await run.done;
      await waitFor(async () => (await host.deliverer.outbox.counts()).dead === 1, 'a dead letter');
      expect(hook.received).toHaveLength(3);
    } finally {
      await host.close();
    }
    const listed = await cli(home, ['deliveries', '--dead', '--json']);
    expect(listed.exitCode).toBe(0);
    const dead = (JSON.parse(listed.stdout) as { dead: Array<{ id: string; attempts: number; lastError: string; kind: string }> }).dead;
    expect(dead).toHaveLength(1);
    expect(dead[0]).toMatchObject({ attempts: 3, kind: 'run.ended' });
    expect(dead[0]!.lastError).toContain('no answer within 150 ms');
    const human = await cli(home, ['deliveries']);
    expect(human.stdout).toContain(dead[0]!.id);
    expect(human.stdout).toContain('dead');

    expect((await cli(home, ['deliveries', 'retry', 'not-a-delivery'])).exitCode).toBe(2);
    const retried = await cli(home, ['deliveries', 'retry', dead[0]!.id]);
    expect(retried.exitCode).toBe(0);
    expect(retried.stdout).toContain(`retrying ${dead[0]!.id}`);
    // The next host with sinks sends it (a daemon sends from the moment it starts).
    answering = true;
    const d = await startDaemon(home);
    try {
      await waitFor(() => hook.received.length === 4, 'the retried delivery');
      expect(hook.received[3]!.headers['x-runwarden-delivery']).toBe(dead[0]!.id);
      await waitFor(async () => JSON.parse((await cli(home, ['deliveries', '--json'])).stdout).pending.length === 0, 'the outbox to empty');
    } finally {
      await d.stop();
      await hook.close();
    }
  });

  it('a pending delivery survives a daemon SIGKILL and is sent by the next daemon', async () => {
    // Reserve a port, then close it: the receiver is down while the first daemon runs.
    const probe = await receiver(() => 200);
    const port = probe.port;
    await probe.close();
    const home = makeHome({ adoptScanMs: 200, delivery: { sinks: [{ name: 'later', type: 'webhook', url: `http://127.0.0.1:${port}/hook`, secret: SECRET }], backoffMs: 100, maxBackoffMs: 200, pollMs: 50, maxAttempts: 1000 } });
    const first = await startDaemon(home);
    const { runId } = (await first.api<{ runId: string }>('POST', '/runs', { spec: quick(tempDir()) })).body;
    await waitFor(async () => (await first.api<{ record: { state: string } }>('GET', `/runs/${runId}`)).body.record.state === 'completed', 'the run to complete');
    await waitFor(async () => ((await first.api<{ pending: Array<{ attempts: number }> }>('GET', '/deliveries')).body.pending[0]?.attempts ?? 0) >= 2, 'failed attempts');
    await first.kill();

    const hook = await receiver(() => 200, port);
    const second = await startDaemon(home);
    try {
      await waitFor(() => hook.received.length >= 1, 'the delivery after the restart');
      const body = JSON.parse(hook.received[0]!.body) as { runId: string; kind: string };
      expect(body).toMatchObject({ runId, kind: 'run.ended' });
      expect(hook.received[0]!.headers['x-runwarden-signature']).toBe(sign(hook.received[0]!.body));
      await waitFor(async () => (await second.api<{ pending: unknown[] }>('GET', '/deliveries')).body.pending.length === 0, 'the outbox to empty');
    } finally {
      await second.stop();
      await hook.close();
    }
  });

  it('command and file sinks get parked gates, budget breaches and ends; an obligation whose event never landed is dropped', async () => {
    const dir = tempDir();
    const out = join(dir, 'deliveries.jsonl');
    const viaCommand = join(dir, 'via-command.jsonl');
    const home = makeHome({
      delivery: {
        sinks: [
          { name: 'log', type: 'file', path: out },
          { name: 'cmd', type: 'command', cmd: 'sh', args: ['-c', `cat >> '${viaCommand}'; echo >> '${viaCommand}'`], events: ['run.parked'] },
        ],
        pollMs: 20,
      },
    });
    const host = await Host.open({ home, logger: false });
    try {
      const gated = await host.start({ spec: { name: 'gated', cwd: dir, nodes: [{ id: 'g', kind: 'human_gate', prompt: 'ok?' }] } });
      await waitFor(async () => (await host.show(gated.runId)).record.state === 'awaiting_human', 'the gate');
      await host.control(gated.runId, 'approve');
      await gated.done;
      const greedy = await host.start({ spec: { name: 'greedy', cwd: dir, nodes: [{ id: 'spin', kind: 'command', cmd: 'sh', args: ['-c', 'sleep 5'], budget: { wallMs: 200 } }] } });
      expect((await greedy.done).record.state).toBe('failed');
      const lines = (): Array<{ kind: string; runId: string; sink: string }> => {
        try {
          return readFileSync(out, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
        } catch {
          return [];
        }
      };
      await waitFor(() => lines().length === 4, 'four deliveries to the file sink');
      expect(lines().map((l) => `${l.runId === gated.runId ? 'gated' : 'greedy'} ${l.kind}`).sort()).toEqual(['gated run.ended', 'gated run.parked', 'greedy budget.breached', 'greedy run.ended']);
      await waitFor(() => readFileSync(viaCommand, 'utf8').trim() !== '', 'the command sink');
      const viaCmd = readFileSync(viaCommand, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l) as { kind: string });
      expect(viaCmd.map((l) => l.kind)).toEqual(['run.parked']);

      // Write-ahead leftovers: an obligation for an event that never committed (seq 999) is dropped, not sent.
      const pending = join(home, 'outbox', 'pending');
      mkdirSync(pending, { recursive: true });
      const record = (await host.show(gated.runId)).record;
      const id = `${gated.runId}~${record.incarnationId.slice(0, 8)}~999~log`;
      const now = new Date().toISOString();
      writeFileSync(join(pending, `${id}.json`), JSON.stringify({ v: 1, id, sink: 'log', kind: 'run.ended', runId: gated.runId, incarnationId: record.incarnationId, seq: 999, eventType: 'run_state', createdAt: now, attempts: 0, nextAt: now }));
      host.deliverer.kick();
      await waitFor(async () => (await host.deliverer.outbox.counts()).pending === 0, 'the orphan obligation to be dropped');
      expect(lines()).toHaveLength(4);
    } finally {
      await host.close();
    }
  });

  it('backoff grows exponentially with jitter, capped', () => {
    expect(backoffMs(1, 1000, 300_000, () => 0)).toBe(500);
    expect(backoffMs(1, 1000, 300_000, () => 1)).toBe(1000);
    expect(backoffMs(4, 1000, 300_000, () => 0.5)).toBe(6000);
    expect(backoffMs(30, 1000, 300_000, () => 1)).toBe(300_000);
  });
});
