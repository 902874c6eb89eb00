/**
 * The per-run critical section, on proper-lockfile (an mkdir lock whose mtime
 * the holder refreshes; a lock left by a dead holder goes stale and is broken).
 *
 * Every write to a run directory, and every reader that must finish a pending
 * batch, runs inside it. Contention waits briefly; a lock still held after the
 * wait budget is reported as busy, which callers turn into `blocked` —
 * contention is not a takeover.
 */
import lockfile from 'proper-lockfile';
import { join } from 'node:path';
import { isErrno } from './fsx.js';

/** The lock could not be taken within the wait budget. */
export class LockBusyError extends Error {
  constructor(readonly dir: string, cause?: unknown) {
    super(`run directory ${dir} is locked by another process`, { cause });
    this.name = 'LockBusyError';
  }
}

/** The run directory does not exist (never created, or deleted). */
export class RunGoneError extends Error {
  constructor(readonly dir: string) {
    super(`run directory ${dir} does not exist`);
    this.name = 'RunGoneError';
  }
}

export interface RunLockOptions {
  /**
   * Age after which a lock whose holder stopped refreshing it is broken.
   * proper-lockfile's minimum (2000 ms): a crashed holder delays the next caller at most this long.
   * @default 2000
   */
  staleMs?: number;
  /** Total time to wait for a contended lock before reporting busy. @default 4000 */
  waitMs?: number;
  /** Called when a held lock was taken away (the holder stalled past `staleMs`). */
  onCompromised?: (err: Error) => void;
}

/** Run `fn` while holding the lock of run directory `dir`. */
export async function withRunLock<T>(dir: string, options: RunLockOptions, fn: () => Promise<T>): Promise<T> {
  const staleMs = options.staleMs ?? 2000;
  const deadline = Date.now() + (options.waitMs ?? 4000);
  let release: () => Promise<void>;
  // Only contention is waited out (2 ms doubling to 100 ms, with jitter); any other failure — the
  // directory gone, a read-only or full disk — is reported at once rather than retried for the budget.
  for (let delay = 2; ; delay = Math.min(100, delay * 2)) {
    try {
      release = await lockfile.lock(dir, {
        lockfilePath: join(dir, 'lease.lock'),
        realpath: false,
        stale: staleMs,
        update: Math.max(1000, Math.floor(staleMs / 2)),
        retries: 0,
        onCompromised: options.onCompromised ?? (() => undefined),
      });
      break;
    } catch (err) {
      if (isErrno(err, 'ENOENT', 'ENOTDIR')) throw new RunGoneError(dir);
      if (!isErrno(err, 'ELOCKED')) throw err;
      if (Date.now() >= deadline) throw new LockBusyError(dir, err);
      await new Promise((r) => setTimeout(r, delay * (0.5 + Math.random())));
    }
  }
  try {
    return await fn();
  } finally {
    await release().catch(() => undefined);
  }
}
