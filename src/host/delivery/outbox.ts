/**
 * The durable outbox: delivery obligations as files under `<home>/outbox/`.
 *
 * ```
 * pending/<id>.json    waiting for its next attempt (nextAt)
 * inflight/<id>.json   claimed by one sender, being sent now
 * dead/<id>.json       gave up after maxAttempts: a dead letter, with the last error
 * ```
 *
 * An obligation is written **before** the commit of the event it reports
 * (write-ahead), so a crash between the two can only leave an obligation
 * whose event never landed — which the sender detects and drops — never a
 * landed event without its obligation. Its id names the run, the incarnation,
 * the event's seq and the sink, so writing it again is harmless.
 *
 * A sender claims an obligation by renaming it from `pending/` to
 * `inflight/` (one rename wins when several hosts share the store), then
 * settles it: deleted when acknowledged, back to `pending/` with a later
 * `nextAt`, or to `dead/`. A claim whose holder died is returned to
 * `pending/` by the next sweep. Delivery is at-least-once: the id travels
 * with every attempt so a receiver can drop duplicates.
 */
import { randomBytes } from 'node:crypto';
import { readdir, rename, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { ensureDir, fsyncDir, isErrno, readJsonLoose, writeFileAtomic } from '../../store/file/fsx.js';
import { leaseIsLive } from '../../store/liveness.js';
import type { OwnerInfo } from '../../store/run-store.js';
import { DELIVERY_KINDS } from './config.js';

export const ObligationSchema = z.strictObject({
  v: z.literal(1),
  /** The delivery id: `<runId>~<incarnation>~<seq>~<sink>`. Stable across attempts. */
  id: z.string(),
  sink: z.string(),
  kind: z.enum(DELIVERY_KINDS),
  runId: z.string(),
  incarnationId: z.string(),
  /** The seq of the event this obligation reports. */
  seq: z.number().int().min(1),
  eventType: z.string(),
  createdAt: z.string(),
  /** Attempts made so far. */
  attempts: z.number().int().min(0),
  /** Not before this ISO instant. */
  nextAt: z.string(),
  lastError: z.string().optional(),
  lastAttemptAt: z.string().optional(),
  deadAt: z.string().optional(),
  /** Who holds an in-flight claim. */
  claim: z.strictObject({ ownerId: z.string(), pid: z.number(), host: z.string(), bootId: z.string().optional(), pidStart: z.string().optional(), at: z.string() }).optional(),
});
export type Obligation = z.infer<typeof ObligationSchema>;

export type OutboxStatus = 'pending' | 'inflight' | 'dead';

/** The delivery id of (run, incarnation, event seq, sink). */
export function deliveryId(runId: string, incarnationId: string, seq: number, sink: string): string {
  return `${runId}~${incarnationId.slice(0, 8)}~${seq}~${sink}`;
}

/** A claim left in `inflight/` without an owner record is an orphan after this long. */
const UNOWNED_CLAIM_MS = 60_000;

export class Outbox {
  readonly dir: string;

  constructor(home: string) {
    this.dir = join(home, 'outbox');
  }

  #path(status: OutboxStatus, id: string): string {
    return join(this.dir, status, `${id}.json`);
  }

  /** Record obligations durably (write-ahead of the commit of their event). */
  async intend(obligations: readonly Obligation[]): Promise<void> {
    if (obligations.length === 0) return;
    const dir = join(this.dir, 'pending');
    await ensureDir(dir);
    for (const o of obligations) await writeFileAtomic(this.#path('pending', o.id), JSON.stringify(o), { durable: true });
    await fsyncDir(dir);
  }

  /** Obligations in one state, oldest first. Files that do not parse are skipped. */
  async list(status: OutboxStatus): Promise<Obligation[]> {
    let names: string[];
    try {
      names = await readdir(join(this.dir, status));
    } catch (err) {
      if (isErrno(err, 'ENOENT')) return [];
      throw err;
    }
    const out: Obligation[] = [];
    for (const name of names) {
      if (!name.endsWith('.json')) continue;
      const parsed = ObligationSchema.safeParse(await readJsonLoose<unknown>(join(this.dir, status, name)));
      if (parsed.success) out.push(parsed.data);
    }
    return out.sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.id < b.id ? -1 : 1));
  }

  /** Counts by state. */
  async counts(): Promise<Record<OutboxStatus, number>> {
    const count = async (status: OutboxStatus): Promise<number> => {
      try {
        return (await readdir(join(this.dir, status))).filter((n) => n.endsWith('.json')).length;
      } catch {
        return 0;
      }
    };
    return { pending: await count('pending'), inflight: await count('inflight'), dead: await count('dead') };
  }

  /**
   * Claim a pending obligation for sending. Undefined when another sender got it first.
   */
  async claim(o: Obligation, owner: OwnerInfo): Promise<Obligation | undefined> {
    await ensureDir(join(this.dir, 'inflight'));
    try {
      await rename(this.#path('pending', o.id), this.#path('inflight', o.id));
    } catch (err) {
      if (isErrno(err, 'ENOENT')) return undefined;
      throw err;
    }
    const claimed: Obligation = { ...o, claim: { ownerId: owner.ownerId, pid: owner.pid, host: owner.host, at: new Date().toISOString() } };
    if (owner.bootId !== undefined) claimed.claim!.bootId = owner.bootId;
    if (owner.pidStart !== undefined) claimed.claim!.pidStart = owner.pidStart;
    await writeFileAtomic(this.#path('inflight', o.id), JSON.stringify(claimed), { durable: false });
    return claimed;
  }

  /** Acknowledged (or dropped): the obligation is gone. */
  async done(o: Obligation): Promise<void> {
    await unlink(this.#path('inflight', o.id)).catch((err: unknown) => {
      if (!isErrno(err, 'ENOENT')) throw err;
    });
  }

  /** Put a claimed obligation back in `pending/` (a failed attempt, or not yet sendable) or in `dead/`. */
  async settle(o: Obligation, to: 'pending' | 'dead'): Promise<void> {
    const { claim: _claim, ...rest } = o;
    await ensureDir(join(this.dir, to));
    await writeFileAtomic(this.#path(to, o.id), JSON.stringify(rest), { durable: true });
    await this.done(o);
  }

  /** Dead letters back to pending, attempts reset. Returns the ids moved. */
  async retry(ids: readonly string[] | 'all'): Promise<string[]> {
    const dead = await this.list('dead');
    const chosen = ids === 'all' ? dead : dead.filter((o) => ids.includes(o.id));
    const now = new Date().toISOString();
    for (const o of chosen) {
      const { deadAt: _deadAt, ...rest } = o;
      await ensureDir(join(this.dir, 'pending'));
      await writeFileAtomic(this.#path('pending', o.id), JSON.stringify({ ...rest, attempts: 0, nextAt: now }), { durable: true });
      await unlink(this.#path('dead', o.id)).catch(() => undefined);
    }
    return chosen.map((o) => o.id);
  }

  /** Return claims whose holder died (or that never recorded one) to `pending/`. Returns how many. */
  async reclaimOrphans(isLive: (claim: NonNullable<Obligation['claim']>) => boolean = claimIsLive): Promise<number> {
    let names: string[];
    try {
      names = await readdir(join(this.dir, 'inflight'));
    } catch {
      return 0;
    }
    let reclaimed = 0;
    for (const name of names) {
      if (!name.endsWith('.json')) continue;
      const path = join(this.dir, 'inflight', name);
      const parsed = ObligationSchema.safeParse(await readJsonLoose<unknown>(path));
      let orphan: boolean;
      if (parsed.success && parsed.data.claim !== undefined) orphan = !isLive(parsed.data.claim);
      else orphan = Date.now() - (await stat(path).catch(() => ({ mtimeMs: Date.now() }))).mtimeMs > UNOWNED_CLAIM_MS;
      if (!orphan) continue;
      const aside = `${path}.${randomBytes(4).toString('hex')}`;
      try {
        await rename(path, aside); // only one sweeper wins
      } catch {
        continue;
      }
      if (parsed.success) await this.settle({ ...parsed.data }, 'pending').catch(() => undefined);
      await unlink(aside).catch(() => undefined);
      reclaimed += 1;
    }
    return reclaimed;
  }
}

function claimIsLive(claim: NonNullable<Obligation['claim']>): boolean {
  return leaseIsLive({ runId: '', incarnationId: '', acquisitionId: '', fence: 0, acquiredAt: claim.at, renewedAt: claim.at, ...claim }, { ttlMs: 10 * 60_000 });
}
