/**
 * Lease liveness, shared by every store.
 *
 * - Same machine and same boot: the holder is alive exactly when its process
 *   is, and a live process is never judged stale for going quiet. The process's
 *   start time is compared too, so a reused pid does not keep a dead lease alive.
 * - Same host name, different boot: the machine rebooted; the holder is gone.
 * - Another machine: alive while its heartbeat is younger than the lease TTL.
 */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { LeaseRecord, OwnerInfo } from './run-store.js';

/** How long a lease held from another machine stays live without a heartbeat: 60 s. */
export const DEFAULT_LEASE_TTL_MS = 60_000;

function readOrUndefined(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return undefined;
  }
}

let bootIdCache: string | null | undefined;
/** This machine's boot id (Linux), or undefined. */
export function bootId(): string | undefined {
  if (bootIdCache === undefined) bootIdCache = readOrUndefined('/proc/sys/kernel/random/boot_id') ?? null;
  return bootIdCache ?? undefined;
}

/** The start time of a process in kernel clock ticks since boot (Linux), or undefined. */
export function processStartTicks(pid: number): string | undefined {
  const stat = readOrUndefined(`/proc/${pid}/stat`);
  if (stat === undefined) return undefined;
  // Field 2 (comm) may hold spaces and parentheses: split after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return fields[19]; // field 22 overall
}

/**
 * Whether a process exists and has not exited (EPERM counts as existing). A
 * zombie — exited, not yet reaped by its parent — is dead: it will never renew
 * a lease again.
 */
export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
  const stat = readOrUndefined(`/proc/${pid}/stat`);
  return stat === undefined || stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
}

/** The identity of this process as an owner. */
export function currentOwner(ownerId: string): OwnerInfo {
  const owner: OwnerInfo = { ownerId, pid: process.pid, host: hostname() };
  const boot = bootId();
  if (boot !== undefined) owner.bootId = boot;
  const start = processStartTicks(process.pid);
  if (start !== undefined) owner.pidStart = start;
  return owner;
}

/** Whether the holder of `lease` is alive. See the module comment for the rules. */
export function leaseIsLive(lease: LeaseRecord, options: { ttlMs?: number; now?: number } = {}): boolean {
  const sameHost = lease.host === hostname();
  const boot = bootId();
  if (sameHost && (lease.bootId === undefined || boot === undefined || lease.bootId === boot)) {
    if (!pidAlive(lease.pid)) return false;
    if (lease.pidStart === undefined) return true;
    const start = processStartTicks(lease.pid);
    return start === undefined || start === lease.pidStart;
  }
  if (sameHost) return false; // same machine name, another boot: the holder died with it
  const renewed = Date.parse(lease.renewedAt);
  return Number.isFinite(renewed) && (options.now ?? Date.now()) - renewed <= (options.ttlMs ?? DEFAULT_LEASE_TTL_MS);
}
