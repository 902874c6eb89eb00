/**
 * The daemon: a long-lived host serving the HTTP API on 127.0.0.1.
 *
 * Files in the store home:
 * ```
 * daemon.token        the bearer token (mode 0600), made on first start, shared by every daemon of the store
 * daemons/<pid>.json  one per live daemon: pid, url, start time (how the CLI finds one)
 * ```
 *
 * On start, and every `adoptScanMs` after, the daemon adopts the runs nobody
 * drives — not ended, with no lease or a stale one (a dead owner on this
 * machine, an expired heartbeat from another) — and resumes them at a node
 * boundary. A run that needs its secrets re-supplied cannot be resumed
 * unattended: it is listed as `needs_secrets` (see `status`) until someone
 * resumes it with its spec. Several daemons may share one store: leases make
 * each run theirs alone, and a daemon adopts the runs of one that died.
 *
 * `stop()` stops taking requests and adoptions, interrupts every run it drives
 * (in-flight attempts are marked interrupted and run again on the next start),
 * releases the leases, and removes its daemon file.
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, readFile, readdir, stat, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { RunwardenError, isRunwardenError } from '../protocol/errors.js';
import { leaseIsLive } from '../store/liveness.js';
import { writeFileAtomic } from '../store/file/fsx.js';
import { compileHostOptions } from './host-options.js';
import { Host, type HostOpenOptions } from './host.js';
import { createApiServer } from './http/server.js';
import { createHostLogger } from './logger.js';

export const DaemonFileSchema = z.object({
  pid: z.number().int(),
  pidStart: z.string().optional(),
  bootId: z.string().optional(),
  host: z.string(),
  ownerId: z.string(),
  url: z.string(),
  port: z.number().int(),
  startedAt: z.string(),
  version: z.string(),
});
/** What `daemons/<pid>.json` holds. */
export type DaemonFile = z.infer<typeof DaemonFileSchema>;

export const VERSION = '0.1.0';

export interface DaemonOptions extends HostOpenOptions {
  /** Also log, pretty, to stderr. @default false */
  pretty?: boolean;
}

/**
 * The token of a store's daemons, made (mode 0600) when there is none. Two
 * daemons starting at once agree: the file is created exclusively.
 */
export async function ensureToken(home: string): Promise<string> {
  const path = join(home, 'daemon.token');
  await mkdir(home, { recursive: true });
  try {
    await writeFile(path, `${randomBytes(32).toString('base64url')}\n`, { flag: 'wx', mode: 0o600 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    // Tighten a token file someone loosened.
    if (((await stat(path)).mode & 0o077) !== 0) await chmod(path, 0o600);
  }
  const token = (await readFile(path, 'utf8')).trim();
  if (token.length < 16) throw new RunwardenError('CONFIG_INVALID', `${path} holds no usable token (delete it; the next start makes a new one)`, { field: 'daemon.token' });
  return token;
}

/** The live daemons of a store, oldest first. Files of dead daemons are removed. */
export async function findDaemons(home: string): Promise<DaemonFile[]> {
  const dir = join(home, 'daemons');
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return [];
  }
  const live: DaemonFile[] = [];
  for (const name of names) {
    if (!/^\d+\.json$/.test(name)) continue;
    const path = join(dir, name);
    let file: DaemonFile;
    try {
      file = DaemonFileSchema.parse(JSON.parse(await readFile(path, 'utf8')));
    } catch {
      continue; // being written, or not ours
    }
    const asLease = { runId: '', incarnationId: '', acquisitionId: '', fence: 0, acquiredAt: file.startedAt, renewedAt: new Date().toISOString(), ...file };
    if (leaseIsLive(asLease)) live.push(file);
    else await unlink(path).catch(() => undefined);
  }
  return live.sort((a, b) => (a.startedAt < b.startedAt ? -1 : 1));
}

export class Daemon {
  readonly host: Host;
  readonly url: string;
  readonly port: number;
  readonly token: string;
  readonly startedAt = new Date();
  readonly #server: FastifyInstance;
  readonly #file: string;
  readonly #closeLog: () => Promise<void>;
  /** Runs that cannot be adopted without their secrets, with the message saying how to resume them. */
  readonly #needsSecrets = new Map<string, string>();
  #scanTimer: NodeJS.Timeout | undefined;
  #scanning: Promise<void> | undefined;
  #stopping: Promise<void> | undefined;

  private constructor(host: Host, server: FastifyInstance, token: string, port: number, closeLog: () => Promise<void>) {
    this.host = host;
    this.#server = server;
    this.token = token;
    this.port = port;
    this.url = `http://127.0.0.1:${port}`;
    this.#file = join(host.options.home, 'daemons', `${process.pid}.json`);
    this.#closeLog = closeLog;
  }

  /**
   * Open the host, listen, publish the daemon file, adopt orphaned runs, and keep adopting.
   * @throws {RunwardenError} `DAEMON_UNAVAILABLE` when the port is taken; `CONFIG_INVALID` for bad options.
   */
  static async start(options: DaemonOptions = {}): Promise<Daemon> {
    const { pretty, logger: given, ...rest } = options;
    const compiled = compileHostOptions(rest);
    const own = given === undefined ? createHostLogger(compiled.home, compiled.logLevel, { pretty: pretty === true }) : undefined;
    const host = await Host.open({ ...rest, deliver: true, logger: given ?? own!.logger });
    const token = await ensureToken(compiled.home);
    let daemon: Daemon | undefined;
    const server = await createApiServer({ host, token, health: () => daemon?.status() ?? {} });
    let port: number;
    try {
      await server.listen({ port: compiled.port, host: '127.0.0.1' });
      port = (server.server.address() as { port: number }).port;
    } catch (err) {
      await server.close().catch(() => undefined);
      await host.close();
      await own?.close();
      const code = (err as NodeJS.ErrnoException).code;
      throw new RunwardenError(
        'DAEMON_UNAVAILABLE',
        code === 'EADDRINUSE' ? `port ${compiled.port} on 127.0.0.1 is in use (another daemon? see 'runwarden status'); choose another with --port` : `cannot listen on 127.0.0.1:${compiled.port}: ${(err as Error).message}`,
        { field: 'port', cause: err },
      );
    }
    daemon = new Daemon(host, server, token, port, own?.close ?? (() => Promise.resolve()));
    await daemon.#publish();
    host.logger.info({ url: daemon.url, pid: process.pid, home: compiled.home }, 'daemon listening');
    await daemon.adoptOrphans();
    daemon.#scanTimer = setInterval(() => void daemon.adoptOrphans(), compiled.adoptScanMs);
    daemon.#scanTimer.unref();
    return daemon;
  }

  async #publish(): Promise<void> {
    const o = this.host.owner;
    const file: DaemonFile = { pid: process.pid, host: o.host, ownerId: o.ownerId, url: this.url, port: this.port, startedAt: this.startedAt.toISOString(), version: VERSION };
    if (o.pidStart !== undefined) file.pidStart = o.pidStart;
    if (o.bootId !== undefined) file.bootId = o.bootId;
    await mkdir(join(this.host.options.home, 'daemons'), { recursive: true });
    await writeFileAtomic(this.#file, JSON.stringify(file), { durable: false });
  }

  /** What `GET /health` and `runwarden status` report beyond the host's counters. */
  status(): Record<string, unknown> {
    return {
      url: this.url,
      startedAt: this.startedAt.toISOString(),
      uptimeMs: Date.now() - this.startedAt.getTime(),
      version: VERSION,
      // A run resumed through this daemon (with its spec) is driven now: no longer waiting for secrets.
      needsSecrets: [...this.#needsSecrets].filter(([runId]) => !this.host.drivenRuns().includes(runId)).map(([runId, message]) => ({ runId, state: 'needs_secrets', message })),
    };
  }

  /**
   * Adopt every run nobody drives (not ended; no lease, or a stale one) and resume it.
   * Runs that need secrets are listed as `needs_secrets` instead. Never throws.
   */
  adoptOrphans(): Promise<void> {
    if (this.#stopping !== undefined) return Promise.resolve();
    this.#scanning ??= this.#scan()
      .catch((err: unknown) => this.host.logger.warn({ err: (err as Error).message }, 'adoption scan failed'))
      .finally(() => {
        this.#scanning = undefined;
      });
    return this.#scanning;
  }

  async #scan(): Promise<void> {
    const open = await this.host.list({ state: ['pending', 'running', 'awaiting_human', 'verifying'] });
    const driven = new Set(this.host.drivenRuns());
    for (const run of open) {
      if (this.#stopping !== undefined) return;
      if (!('state' in run) || driven.has(run.runId)) continue;
      const loaded = await this.host.store.load(run.runId).catch(() => undefined);
      if (loaded === undefined || (loaded.lease !== undefined && this.host.store.isLeaseLive(loaded.lease))) continue;
      try {
        await this.host.resume(run.runId);
        this.#needsSecrets.delete(run.runId);
        this.host.logger.info({ runId: run.runId, state: run.state, previousOwner: loaded.lease === undefined ? null : { pid: loaded.lease.pid, host: loaded.lease.host } }, 'adopted a run nobody drove');
      } catch (err) {
        if (isRunwardenError(err) && err.code === 'SECRETS_REQUIRED') {
          if (!this.#needsSecrets.has(run.runId)) this.host.logger.warn({ runId: run.runId }, err.message);
          this.#needsSecrets.set(run.runId, err.message);
        } else if (!isRunwardenError(err) || !['LEASE_HELD', 'RUN_TERMINAL', 'RUN_NOT_FOUND', 'STORE_BLOCKED'].includes(err.code)) {
          this.host.logger.warn({ runId: run.runId, err: (err as Error).message }, 'could not adopt a run');
        }
      }
    }
    // A run resumed by someone else (with its secrets) no longer needs them from us.
    for (const runId of this.#needsSecrets.keys()) {
      const loaded = await this.host.store.load(runId).catch(() => undefined);
      if (loaded === undefined || (loaded.lease !== undefined && this.host.store.isLeaseLive(loaded.lease)) || !open.some((r) => r.runId === runId)) this.#needsSecrets.delete(runId);
    }
  }

  /**
   * Stop: no new requests or adoptions; every driven run interrupted (resumable),
   * leases released, workers stopped, the daemon file removed. Idempotent.
   */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      if (this.#scanTimer !== undefined) clearInterval(this.#scanTimer);
      await this.#scanning;
      await this.#server.close().catch(() => undefined);
      await this.host.close();
      await unlink(this.#file).catch(() => undefined);
      await this.#closeLog();
    })();
    return this.#stopping;
  }
}
