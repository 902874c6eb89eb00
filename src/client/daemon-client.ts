/**
 * A client of a runwarden daemon's HTTP API: what the CLI uses when a daemon
 * runs for its store, and what programs can use to drive a daemon.
 *
 * @example
 * const client = await DaemonClient.connect('/home/me/.runwarden');
 * const { runId } = await client.start({ spec });
 * for await (const event of client.events(runId)) console.log(event.type);
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import { RunwardenError, type ErrorCode } from '../protocol/errors.js';
import type { ControlRequest, RunEvent } from '../protocol/events.js';
import type { RunRecord } from '../protocol/record.js';
import type { WorkflowSpec } from '../protocol/spec.js';
import type { ListedRun, ListOptions } from '../store/run-store.js';
import { findDaemons, type DaemonFile } from '../host/daemon.js';
import type { ControlReceipt } from '../host/host.js';
import type { EvidenceBundle } from '../host/kernel/evidence.js';
import type { Obligation } from '../host/delivery/outbox.js';

/** A run as `GET /runs/:id` returns it. */
export interface RunView {
  record: RunRecord;
  spec: WorkflowSpec;
  owner: { pid: number; host: string; fence: number; live: boolean } | null;
  location: string | null;
}

export interface StartRequest {
  spec?: unknown;
  specPath?: string;
  cwd?: string;
  runId?: string;
  template?: string;
  args?: Record<string, unknown>;
}

/** What `GET /health` answers. */
export interface DaemonHealth {
  ok: boolean;
  pid: number;
  home: string;
  url: string;
  startedAt: string;
  uptimeMs: number;
  version: string;
  driving: string[];
  executions: { running: number; queued: number };
  workers: { process: number; thread: number };
  deliveries: { pending: number; inflight: number; dead: number };
  needsSecrets: Array<{ runId: string; state: 'needs_secrets'; message: string }>;
}

export interface EventsOptions {
  /** Start after this seq. @default 0 */
  after?: number;
  /** Follow the run until it ends (reconnecting with Last-Event-ID when the connection drops). @default true */
  follow?: boolean;
  signal?: AbortSignal;
  /** How long to keep trying to reconnect before giving up. @default 10000 */
  reconnectMs?: number;
}

export class DaemonClient {
  readonly url: string;
  readonly #auth: string;
  /** The daemon's file, when found by {@link connect}. */
  readonly daemon: DaemonFile | undefined;

  constructor(options: { url: string; token: string; daemon?: DaemonFile }) {
    this.url = options.url.replace(/\/$/, '');
    this.#auth = `Bearer ${options.token}`;
    this.daemon = options.daemon;
  }

  /** A client of a live daemon of the store at `home` that answers, or undefined when none does. */
  static async connect(home: string, options: { timeoutMs?: number } = {}): Promise<DaemonClient | undefined> {
    const daemons = await findDaemons(home);
    if (daemons.length === 0) return undefined;
    let token: string;
    try {
      token = (await readFile(join(home, 'daemon.token'), 'utf8')).trim();
    } catch {
      return undefined;
    }
    for (const daemon of daemons.reverse()) {
      const client = new DaemonClient({ url: daemon.url, token, daemon });
      try {
        await client.#request('GET', '/health', undefined, options.timeoutMs ?? 3000);
        return client;
      } catch {
        // starting, stopping, or wedged: try the next
      }
    }
    return undefined;
  }

  async #request<T>(method: string, path: string, body?: unknown, timeoutMs = 120_000): Promise<T> {
    let response: Response;
    try {
      response = await fetch(`${this.url}${path}`, {
        method,
        headers: { authorization: this.#auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      const e = err as Error & { cause?: Error };
      throw new RunwardenError('DAEMON_UNAVAILABLE', `the daemon at ${this.url} did not answer ${method} ${path}: ${e.cause?.message ?? e.message}`, { cause: err });
    }
    const text = await response.text();
    let json: unknown;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    if (!response.ok) throw errorFrom(response.status, json);
    return json as T;
  }

  health(): Promise<DaemonHealth> {
    return this.#request('GET', '/health');
  }

  /** Start a run in the daemon. */
  start(request: StartRequest): Promise<{ runId: string; state: string }> {
    return this.#request('POST', '/runs', request);
  }

  resume(runId: string, options: { spec?: unknown; specPath?: string } = {}): Promise<{ runId: string; state: string }> {
    return this.#request('POST', `/runs/${encodeURIComponent(runId)}/resume`, options);
  }

  control(runId: string, action: ControlRequest['action'], options: { text?: string; waitMs?: number } = {}): Promise<ControlReceipt> {
    const id = encodeURIComponent(runId);
    const wait = options.waitMs === undefined ? {} : { waitMs: options.waitMs };
    switch (action) {
      case 'cancel':
        return this.#request('POST', `/runs/${id}/cancel`, wait);
      case 'steer':
        return this.#request('POST', `/runs/${id}/steer`, { text: options.text ?? '', ...wait });
      case 'approve':
      case 'reject':
        return this.#request('POST', `/runs/${id}/approve`, { ...(action === 'reject' ? { reject: true } : {}), ...(options.text === undefined ? {} : { reason: options.text }), ...wait });
    }
  }

  show(runId: string): Promise<RunView> {
    return this.#request('GET', `/runs/${encodeURIComponent(runId)}`);
  }

  /** One page of runs, and the cursor of the next (null on the last page). */
  list(options: ListOptions = {}): Promise<{ runs: ListedRun[]; next: string | null }> {
    const q = new URLSearchParams();
    if (options.includeChildren === true) q.set('all', 'true');
    if (options.state !== undefined) q.set('state', options.state.join(','));
    if (options.outcome !== undefined) q.set('outcome', options.outcome.join(','));
    if (options.name !== undefined) q.set('name', options.name);
    if (options.since !== undefined) q.set('since', options.since);
    if (options.after !== undefined) q.set('after', options.after);
    if (options.limit !== undefined) q.set('limit', String(options.limit));
    const qs = q.toString();
    return this.#request('GET', `/runs${qs === '' ? '' : `?${qs}`}`);
  }

  evidence(runId: string, evidenceId?: string): Promise<{ evidenceId: string; location: string | null; bundle: EvidenceBundle }> {
    return this.#request('GET', `/runs/${encodeURIComponent(runId)}/evidence${evidenceId === undefined ? '' : `?id=${encodeURIComponent(evidenceId)}`}`);
  }

  async delete(runId: string): Promise<string[]> {
    return (await this.#request<{ deleted: string[] }>('DELETE', `/runs/${encodeURIComponent(runId)}`)).deleted;
  }

  deliveries(status: 'pending' | 'dead' | 'all' = 'all'): Promise<{ pending: Obligation[]; dead: Obligation[] }> {
    return this.#request('GET', `/deliveries?status=${status}`);
  }

  retryDeliveries(ids: string[] | 'all'): Promise<{ retried: string[] }> {
    return this.#request('POST', '/deliveries/retry', ids === 'all' ? { all: true } : { ids });
  }

  /**
   * A run's events as the daemon streams them (server-sent events). With
   * `follow`, until the run ends; a dropped connection is resumed from the last
   * seq received (`Last-Event-ID`), so no event is missed or repeated.
   * @throws {RunwardenError} `RUN_NOT_FOUND`; `DAEMON_UNAVAILABLE` when the daemon stays unreachable for `reconnectMs`.
   */
  async *events(runId: string, options: EventsOptions = {}): AsyncGenerator<RunEvent> {
    let after = options.after ?? 0;
    const follow = options.follow ?? true;
    let failingSince: number | undefined;
    for (;;) {
      if (options.signal?.aborted) return;
      let response: Response | undefined;
      try {
        response = await fetch(`${this.url}/runs/${encodeURIComponent(runId)}/events?follow=${follow}`, {
          headers: { authorization: this.#auth, accept: 'text/event-stream', 'last-event-id': String(after) },
          ...(options.signal === undefined ? {} : { signal: options.signal }),
        });
      } catch (err) {
        if (options.signal?.aborted) return;
        failingSince ??= Date.now();
        if (Date.now() - failingSince > (options.reconnectMs ?? 10_000)) {
          throw new RunwardenError('DAEMON_UNAVAILABLE', `lost the daemon at ${this.url} while following run ${runId} (after event ${after}): ${(err as Error & { cause?: Error }).cause?.message ?? (err as Error).message}`);
        }
        await new Promise((r) => setTimeout(r, 500));
        continue;
      }
      if (!response.ok) throw errorFrom(response.status, await response.json().catch(() => undefined));
      failingSince = undefined;
      let ended = false;
      try {
        const stream = response.body!.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
        for await (const message of stream) {
          if (message.event === 'end') {
            ended = true;
            break;
          }
          if (message.event === 'gone') throw new RunwardenError('RUN_NOT_FOUND', `run ${runId} was deleted`, { field: 'runId' });
          const event = JSON.parse(message.data) as RunEvent;
          if (event.seq <= after) continue;
          after = event.seq;
          yield event;
        }
      } catch (err) {
        if (err instanceof RunwardenError) throw err;
        if (options.signal?.aborted) return;
        // The connection dropped: reconnect after the last event received.
      }
      if (ended || !follow) return;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

function errorFrom(status: number, body: unknown): RunwardenError {
  const b = body as { code?: unknown; message?: unknown; field?: unknown } | undefined;
  if (b !== undefined && typeof b.code === 'string' && typeof b.message === 'string') {
    return new RunwardenError(b.code as ErrorCode, b.message, typeof b.field === 'string' ? { field: b.field } : {});
  }
  return new RunwardenError('DAEMON_UNAVAILABLE', `the daemon answered HTTP ${status} without an error body`);
}
