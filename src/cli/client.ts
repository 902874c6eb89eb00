/**
 * One interface for every command, two ways to serve it: through the daemon
 * of the store when one runs (HTTP), else through a host embedded in this
 * process. Both answer the same shapes, so commands print the same either way.
 */
import { DaemonClient, type EventsOptions, type RunView } from '../client/daemon-client.js';
import { Host, type ControlAction, type ControlReceipt } from '../host/host.js';
import type { EvidenceBundle } from '../host/kernel/evidence.js';
import type { Obligation } from '../host/delivery/outbox.js';
import { resolveHome } from '../host/host-options.js';
import { TERMINAL_STATES, type RunEvent } from '../protocol/events.js';
import { cursorOf } from '../store/run-query.js';
import type { ListedRun, ListOptions } from '../store/run-store.js';
import type { Globals } from './io.js';

export type { RunView } from '../client/daemon-client.js';

export interface Client {
  /** `daemon`: requests go to the daemon at `url`; `embedded`: to a host in this process. */
  readonly via: 'daemon' | 'embedded';
  readonly home: string;
  show(runId: string): Promise<RunView>;
  list(options: ListOptions): Promise<{ runs: ListedRun[]; next: string | null }>;
  evidence(runId: string, evidenceId?: string): Promise<{ evidenceId: string; location: string | null; bundle: EvidenceBundle }>;
  control(runId: string, action: ControlAction, options?: { text?: string }): Promise<ControlReceipt>;
  delete(runId: string): Promise<string[]>;
  /** Events after `after`; with `follow`, until the run ends. */
  events(runId: string, options: EventsOptions): AsyncGenerator<RunEvent>;
  deliveries(status: 'pending' | 'dead' | 'all'): Promise<{ pending: Obligation[]; dead: Obligation[] }>;
  retryDeliveries(ids: string[] | 'all'): Promise<{ retried: string[] }>;
  close(): Promise<void>;
}

/** The daemon's client, when a daemon of this store answers (and `--no-daemon` was not given). */
export async function daemonFor(g: Globals): Promise<DaemonClient | undefined> {
  if (g.daemon === false || process.env.RUNWARDEN_NO_DAEMON === '1') return undefined;
  return DaemonClient.connect(resolveHome(g.home));
}

class RemoteClient implements Client {
  readonly via = 'daemon' as const;
  readonly home: string;
  readonly d: DaemonClient;

  constructor(home: string, d: DaemonClient) {
    this.home = home;
    this.d = d;
  }

  show(runId: string): Promise<RunView> {
    return this.d.show(runId);
  }
  list(options: ListOptions): Promise<{ runs: ListedRun[]; next: string | null }> {
    return this.d.list(options);
  }
  evidence(runId: string, evidenceId?: string): Promise<{ evidenceId: string; location: string | null; bundle: EvidenceBundle }> {
    return this.d.evidence(runId, evidenceId);
  }
  control(runId: string, action: ControlAction, options: { text?: string } = {}): Promise<ControlReceipt> {
    return this.d.control(runId, action, options);
  }
  delete(runId: string): Promise<string[]> {
    return this.d.delete(runId);
  }
  events(runId: string, options: EventsOptions): AsyncGenerator<RunEvent> {
    return this.d.events(runId, options);
  }
  deliveries(status: 'pending' | 'dead' | 'all'): Promise<{ pending: Obligation[]; dead: Obligation[] }> {
    return this.d.deliveries(status);
  }
  retryDeliveries(ids: string[] | 'all'): Promise<{ retried: string[] }> {
    return this.d.retryDeliveries(ids);
  }
  async close(): Promise<void> {}
}

/** A host in this process, opened on first use. */
export class EmbeddedClient implements Client {
  readonly via = 'embedded' as const;
  readonly home: string;
  readonly #g: Globals;
  #host: Promise<Host> | undefined;

  constructor(g: Globals) {
    this.#g = g;
    this.home = resolveHome(g.home);
  }

  host(): Promise<Host> {
    this.#host ??= Host.open(this.#g.home === undefined ? {} : { home: this.#g.home });
    return this.#host;
  }

  async show(runId: string): Promise<RunView> {
    const host = await this.host();
    const run = await host.show(runId);
    const owner = run.lease === undefined ? null : { pid: run.lease.pid, host: run.lease.host, fence: run.lease.fence, live: host.store.isLeaseLive(run.lease) };
    return { record: run.record, spec: run.spec, owner, location: host.store.locate(runId) ?? null };
  }

  async list(options: ListOptions): Promise<{ runs: ListedRun[]; next: string | null }> {
    const host = await this.host();
    if (options.limit === undefined) return { runs: await host.list(options), next: null };
    const runs = await host.list({ ...options, limit: options.limit + 1 });
    const page = runs.slice(0, options.limit);
    const last = page[page.length - 1];
    return { runs: page, next: runs.length > options.limit && last !== undefined ? cursorOf(last) : null };
  }

  async evidence(runId: string, evidenceId?: string): Promise<{ evidenceId: string; location: string | null; bundle: EvidenceBundle }> {
    const found = await (await this.host()).evidence(runId, evidenceId);
    return { evidenceId: found.evidenceId, location: found.location ?? null, bundle: found.bundle };
  }

  async control(runId: string, action: ControlAction, options: { text?: string } = {}): Promise<ControlReceipt> {
    return (await this.host()).control(runId, action, options);
  }

  async delete(runId: string): Promise<string[]> {
    return (await this.host()).delete(runId);
  }

  async *events(runId: string, options: EventsOptions): AsyncGenerator<RunEvent> {
    const host = await this.host();
    await host.show(runId);
    let after = options.after ?? 0;
    for (;;) {
      for (const e of await host.store.readEvents(runId, after)) {
        after = e.seq;
        yield e;
      }
      if (options.follow === false || options.signal?.aborted) return;
      const run = await host.show(runId);
      if (TERMINAL_STATES.has(run.record.state) && run.record.seq <= after) return;
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  async deliveries(status: 'pending' | 'dead' | 'all'): Promise<{ pending: Obligation[]; dead: Obligation[] }> {
    const outbox = (await this.host()).deliverer.outbox;
    const pending = status === 'dead' ? [] : [...(await outbox.list('pending')), ...(await outbox.list('inflight'))];
    return { pending, dead: status === 'pending' ? [] : await outbox.list('dead') };
  }

  async retryDeliveries(ids: string[] | 'all'): Promise<{ retried: string[] }> {
    return { retried: await (await this.host()).deliverer.outbox.retry(ids) };
  }

  async close(): Promise<void> {
    if (this.#host !== undefined) await (await this.#host).close();
  }
}

/** The {@link Client} of a daemon already found. */
export function remoteClient(g: Globals, d: DaemonClient): Client {
  return new RemoteClient(resolveHome(g.home), d);
}

/** Run `fn` with the daemon's client when a daemon runs, else with an embedded host; closes it afterwards. */
export async function withClient<T>(g: Globals, fn: (client: Client) => Promise<T>): Promise<T> {
  const d = await daemonFor(g);
  const client: Client = d === undefined ? new EmbeddedClient(g) : new RemoteClient(resolveHome(g.home), d);
  try {
    return await fn(client);
  } finally {
    await client.close();
  }
}
