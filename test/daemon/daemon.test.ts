import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RunEvent } from '../../src/protocol/events.js';
import type { RunRecord } from '../../src/protocol/record.js';
import { assertConsistent, makeHome, markNode, marks, readEvents, runDir, tempDir, waitFor } from '../helpers/cli.js';
import { startDaemon, type TestDaemon } from '../helpers/daemon.js';

interface RunView {
  record: RunRecord;
  owner: { pid: number; live: boolean } | null;
}

async function runState(d: TestDaemon, runId: string): Promise<RunRecord> {
  return (await d.api<RunView>('GET', `/runs/${runId}`)).body.record;
}

/** Read a server-sent event stream until `stop` says so or it ends; returns the messages. */
async function readSse(url: string, token: string, headers: Record<string, string>, stop: (m: { id?: string; event?: string; data: string }) => boolean): Promise<Array<{ id?: string; event?: string; data: string }>> {
  const controller = new AbortController();
  const response = await fetch(url, { headers: { authorization: `Bearer ${token}`, ...headers }, signal: controller.signal });
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toContain('text/event-stream');
  const messages: Array<{ id?: string; event?: string; data: string }> = [];
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for await (const chunk of response.body!) {
      buffer += decoder.decode(chunk as Uint8Array, { stream: true });
      let at: number;
      while ((at = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, at);
        buffer = buffer.slice(at + 2);
        const m: { id?: string; event?: string; data: string } = { data: '' };
        for (const line of block.split('\n')) {
          if (line.startsWith('id: ')) m.id = line.slice(4);
          else if (line.startsWith('event: ')) m.event = line.slice(7);
          else if (line.startsWith('data: ')) m.data += line.slice(6);
        }
        if (m.data === '' && m.event === undefined) continue; // retry: / comments
        messages.push(m);
        if (stop(m)) {
          controller.abort();
          return messages;
        }
      }
    }
  } catch (err) {
    if (!controller.signal.aborted) throw err;
  }
  return messages;
}

describe('daemon: crash and restart', () => {
  it('SIGKILL mid-run: a new daemon finishes the run without a resume call; events have no gaps or duplicates', async () => {
    const home = makeHome({ adoptScanMs: 200 });
    const dir = tempDir();
    const mark = join(dir, 'marks');
    const first = await startDaemon(home);
    const spec = { name: 'survivor', cwd: dir, nodes: [markNode('a', mark), markNode('b', mark, 2), markNode('c', mark)] };
    const started = await first.api<{ runId: string }>('POST', '/runs', { spec });
    expect(started.status).toBe(201);
    const { runId } = started.body;
    await waitFor(() => marks(mark).b === 1, 'node b to start');
    await first.kill();

    const second = await startDaemon(home);
    try {
      const done = await waitFor(async () => {
        const r = await runState(second, runId);
        return r.state === 'completed' ? r : undefined;
      }, 'the run to complete in the new daemon');
      expect(done.outcome).toBe('unverified');
      // a succeeded before the crash and never ran again; b was in flight and ran again from the top.
      expect(marks(mark)).toEqual({ a: 1, b: 2, c: 1 });
      assertConsistent(home, runId);
      expect(readEvents(home, runId).some((e) => e.type === 'node_requeued' && e.reason === 'host_lost')).toBe(true);
    } finally {
      await second.stop();
    }
  });

  it('SIGTERM mid-run: exit 0, the claim is interrupted and the lease released; the next start completes the run', async () => {
    const home = makeHome({ adoptScanMs: 200 });
    const dir = tempDir();
    const mark = join(dir, 'marks');
    const first = await startDaemon(home);
    // The slow node sleeps 30 s the first time, and not once the file 'fast' exists.
    const slow = { id: 'slow', kind: 'command', cmd: 'sh', args: ['-c', 'echo slow >> "$MARK"; [ -e fast ] || sleep 30'], env: { MARK: mark } };
    const spec = { name: 'graceful', cwd: dir, nodes: [markNode('a', mark), slow, markNode('c', mark)] };
    const { runId } = (await first.api<{ runId: string }>('POST', '/runs', { spec })).body;
    await waitFor(() => marks(mark).slow === 1, 'the slow node to start');
    const t0 = Date.now();
    expect(await first.stop()).toBe(0);
    expect(Date.now() - t0).toBeLessThan(15_000);
    const events = readEvents(home, runId);
    expect(events.at(-1)).toMatchObject({ type: 'node_interrupted', node: 'slow' });
    expect(existsSync(join(runDir(home, runId), 'lease.json'))).toBe(false);
    expect(existsSync(join(home, 'daemons', `${first.pid}.json`))).toBe(false);

    writeFileSync(join(dir, 'fast'), '');
    const second = await startDaemon(home);
    try {
      const done = await waitFor(async () => {
        const r = await runState(second, runId);
        return r.state === 'completed' ? r : undefined;
      }, 'the run to complete after the restart');
      expect(done.nodes.slow!.attempts.map((a) => a.state)).toEqual(['interrupted', 'succeeded']);
      expect(marks(mark)).toEqual({ a: 1, slow: 2, c: 1 });
      assertConsistent(home, runId);
    } finally {
      await second.stop();
    }
  });
});

describe('daemon: events over SSE', () => {
  it('a client that disconnects and reconnects with Last-Event-ID receives exactly the events it missed', async () => {
    const home = makeHome();
    const dir = tempDir();
    const d = await startDaemon(home);
    try {
      const spec = {
        name: 'gated',
        cwd: dir,
        nodes: [
          { id: 'a', kind: 'command', cmd: 'echo', args: ['one'] },
          { id: 'gate', kind: 'human_gate', prompt: 'go on?' },
          { id: 'b', kind: 'command', cmd: 'echo', args: ['two'] },
          { id: 'c', kind: 'command', cmd: 'echo', args: ['three'] },
        ],
      };
      const { runId } = (await d.api<{ runId: string }>('POST', '/runs', { spec })).body;
      const url = `${d.url}/runs/${runId}/events`;
      // First connection: read until the run parks at the gate, then hang up.
      const before = await readSse(url, d.token, {}, (m) => (JSON.parse(m.data) as RunEvent).type === 'run_state' && (JSON.parse(m.data) as { state: string }).state === 'awaiting_human');
      const lastId = Number(before.at(-1)!.id);
      expect(before.map((m) => Number(m.id))).toEqual(Array.from({ length: lastId }, (_, i) => i + 1));

      // While disconnected, the run moves on and ends.
      expect((await d.api('POST', `/runs/${runId}/approve`, { reason: 'fine' })).status).toBe(200);
      await waitFor(async () => (await runState(d, runId)).state === 'completed', 'the run to complete');

      const after = await readSse(url, d.token, { 'last-event-id': String(lastId) }, () => false);
      const end = after.pop()!;
      expect(end.event).toBe('end');
      expect(JSON.parse(end.data)).toMatchObject({ state: 'completed' });
      const all = readEvents(home, runId);
      expect(after.map((m) => JSON.parse(m.data) as RunEvent)).toEqual(all.filter((e) => e.seq > lastId));
      expect(after.map((m) => Number(m.id))).toEqual(all.filter((e) => e.seq > lastId).map((e) => e.seq));

      // A bad Last-Event-ID is refused, naming the header.
      const bad = await fetch(url, { headers: { authorization: `Bearer ${d.token}`, 'last-event-id': 'yesterday' } });
      expect(bad.status).toBe(400);
      expect(await bad.json()).toMatchObject({ code: 'OPTION_INVALID', field: 'last-event-id' });
    } finally {
      await d.stop();
    }
  });
});

describe('daemon: the HTTP API at its boundary', () => {
  it('401 without the token, 400 naming the field for bad bodies, 404 for unknown runs and routes; nothing written', async () => {
    const home = makeHome();
    const d = await startDaemon(home);
    try {
      const noToken = await fetch(`${d.url}/runs`);
      expect(noToken.status).toBe(401);
      expect(await noToken.json()).toMatchObject({ code: 'UNAUTHORIZED' });
      const wrong = await fetch(`${d.url}/health`, { headers: { authorization: 'Bearer not-the-token' } });
      expect(wrong.status).toBe(401);
      const unauthPost = await fetch(`${d.url}/runs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ spec: { name: 'x', nodes: [{ id: 'a', kind: 'command', cmd: 'true' }] } }) });
      expect(unauthPost.status).toBe(401);

      const cases: Array<[string, string, unknown, number, string, string]> = [
        ['POST', '/runs', { spec: { name: 'x', nodes: [{ id: 'a', kind: 'command' }] } }, 400, 'SPEC_INVALID', 'spec.nodes[0].cmd'],
        ['POST', '/runs', { spec: { name: 'x', nodes: [] }, runId: 'ok' }, 400, 'SPEC_INVALID', 'spec.nodes'],
        ['POST', '/runs', { spec: { name: 'x', nodes: [{ id: 'a', kind: 'command', cmd: 'true' }] }, surprise: 1 }, 400, 'OPTION_INVALID', 'surprise'],
        ['POST', '/runs', {}, 400, 'OPTION_INVALID', 'spec'],
        ['POST', '/runs', { spec: { name: 'x', nodes: [{ id: 'a', kind: 'command', cmd: 'true' }] }, runId: '../escape' }, 400, 'RUN_ID_INVALID', 'runId'],
        ['POST', '/runs', { spec: { name: 'x', nodes: [{ id: 'a', kind: 'command', cmd: 'true' }] }, cwd: 'relative' }, 400, 'OPTION_INVALID', 'cwd'],
        ['POST', '/runs', { template: 'nope' }, 400, 'TEMPLATE_NOT_FOUND', 'template'],
        ['GET', '/runs?state=bogus', undefined, 400, 'OPTION_INVALID', 'state'],
        ['GET', '/runs?limit=0', undefined, 400, 'OPTION_INVALID', 'limit'],
        ['GET', '/runs?since=yesterday', undefined, 400, 'OPTION_INVALID', 'since'],
        ['GET', '/runs/nope', undefined, 404, 'RUN_NOT_FOUND', 'runId'],
        ['POST', '/runs/nope/cancel', undefined, 404, 'RUN_NOT_FOUND', 'runId'],
        ['POST', '/runs/nope/steer', { text: '   ' }, 400, 'OPTION_INVALID', 'text'],
        ['GET', '/runs/nope/events', undefined, 404, 'RUN_NOT_FOUND', 'runId'],
        ['DELETE', '/runs/nope', undefined, 404, 'RUN_NOT_FOUND', 'runId'],
        ['POST', '/deliveries/retry', {}, 400, 'OPTION_INVALID', 'ids'],
      ];
      for (const [method, path, body, status, code, field] of cases) {
        const r = await d.api<{ code: string; field?: string; message: string }>(method, path, body);
        expect({ method, path, status: r.status, code: r.body.code, field: r.body.field }).toEqual({ method, path, status, code, field });
        expect(r.body.message.length).toBeGreaterThan(0);
      }
      const route = await d.api<{ code: string }>('GET', '/nowhere');
      expect(route).toMatchObject({ status: 404, body: { code: 'ROUTE_NOT_FOUND' } });
      const badJson = await fetch(`${d.url}/runs`, { method: 'POST', headers: { authorization: `Bearer ${d.token}`, 'content-type': 'application/json' }, body: '{"spec":' });
      expect(badJson.status).toBe(400);
      expect(await badJson.json()).toMatchObject({ code: 'OPTION_INVALID', field: 'body' });
      const text = await fetch(`${d.url}/runs`, { method: 'POST', headers: { authorization: `Bearer ${d.token}`, 'content-type': 'text/plain' }, body: 'hello' });
      expect(text.status).toBe(415);
      // Nothing of the refused requests reached the store.
      expect((await d.api<{ runs: unknown[] }>('GET', '/runs')).body.runs).toEqual([]);
    } finally {
      await d.stop();
    }
  });

  it('serves runs, filters and pages, controls, deletes, and Prometheus metrics', async () => {
    const home = makeHome();
    const dir = tempDir();
    const d = await startDaemon(home);
    try {
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const r = await d.api<{ runId: string }>('POST', '/runs', { spec: { name: i === 2 ? 'gated' : 'quick', cwd: dir, nodes: i === 2 ? [{ id: 'g', kind: 'human_gate', prompt: 'ok?' }] : [{ id: 'a', kind: 'command', cmd: 'true' }] }, runId: `r${i}` });
        expect(r.status).toBe(201);
        ids.push(r.body.runId);
      }
      expect(ids).toEqual(['r0', 'r1', 'r2']);
      await waitFor(async () => (await runState(d, 'r2')).state === 'awaiting_human' && (await runState(d, 'r0')).state === 'completed' && (await runState(d, 'r1')).state === 'completed', 'runs to settle');
      const page1 = await d.api<{ runs: Array<{ runId: string }>; next: string | null }>('GET', '/runs?limit=2');
      const page2 = await d.api<{ runs: Array<{ runId: string }>; next: string | null }>('GET', `/runs?limit=2&after=${page1.body.next}`);
      expect([...page1.body.runs, ...page2.body.runs].map((r) => r.runId).sort()).toEqual(ids);
      expect(page2.body.next).toBeNull();
      expect((await d.api<{ runs: Array<{ runId: string }> }>('GET', '/runs?state=awaiting_human')).body.runs.map((r) => r.runId)).toEqual(['r2']);
      expect((await d.api<{ runs: Array<{ runId: string }> }>('GET', '/runs?name=quick&state=completed,failed')).body.runs).toHaveLength(2);

      const view = await d.api<RunView>('GET', '/runs/r2');
      expect(view.body.owner).toMatchObject({ pid: d.pid, live: true });
      expect(await d.api('POST', '/runs/r2/approve', { reject: true, reason: 'no' })).toMatchObject({ status: 200, body: { status: 'applied' } });
      await waitFor(async () => (await runState(d, 'r2')).state === 'failed', 'the rejected run to fail');
      expect((await d.api<{ code: string }>('POST', '/runs/r2/cancel')).body.code).toBe('RUN_TERMINAL');

      const metrics = await fetch(`${d.url}/metrics`, { headers: { authorization: `Bearer ${d.token}` } });
      expect(metrics.headers.get('content-type')).toContain('text/plain');
      const text = await metrics.text();
      expect(text).toContain('runwarden_runs{state="completed"} 2');
      expect(text).toContain('runwarden_runs{state="failed"} 1');
      expect(text).toMatch(/runwarden_commit_duration_seconds_count [1-9]/);
      expect(text).toContain('runwarden_executions_in_flight{isolation="process"}');
      expect(text).toContain('runwarden_queue_depth{isolation="process"} 0');
      expect(text).toContain('runwarden_workers{isolation="process"}');
      expect(text).toContain('runwarden_budget_breaches_total 0');

      expect(await d.api('DELETE', '/runs/r0')).toMatchObject({ status: 200, body: { deleted: ['r0'] } });
      expect((await d.api('GET', '/runs/r0')).status).toBe(404);
      const health = await d.api<{ ok: boolean; pid: number; needsSecrets: unknown[] }>('GET', '/health');
      expect(health.body).toMatchObject({ ok: true, pid: d.pid, needsSecrets: [] });
    } finally {
      await d.stop();
    }
  });
});
