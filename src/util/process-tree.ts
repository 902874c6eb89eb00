/**
 * Terminating a process and everything it started.
 *
 * Termination escalates and waits: SIGTERM to the process, its process group
 * and every descendant (collected before anything is signalled, since a dead
 * parent's children are re-parented out of its tree), then after `graceMs`
 * SIGKILL to whatever is left, then wait until all of them are gone. A zombie
 * counts as gone: it holds no resources and runs no code.
 */
import { readFileSync, readdirSync } from 'node:fs';
import pidtree from 'pidtree';

/** Descendant pids of `pid` (children, grandchildren, …); empty when it has none or the table cannot be read. */
export async function descendants(pid: number): Promise<number[]> {
  try {
    return await pidtree(pid);
  } catch {
    return [];
  }
}

/** Whether `pid` is a live process (not a zombie). */
export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true; // no /proc: trust kill(0)
  }
}

/**
 * Running (non-zombie) members of process group `pgid`, read from /proc; when
 * /proc cannot be read, `[pgid]` if the group still exists, else `[]`.
 */
export function groupMembers(pgid: number): number[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    try {
      process.kill(-pgid, 0);
      return [pgid];
    } catch {
      return [];
    }
  }
  const members: number[] = [];
  for (const name of entries) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] !== 'Z' && Number(fields[2]) === pgid) members.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return members;
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

export interface TerminateOptions {
  /** Time between SIGTERM and SIGKILL. @default 5000 */
  graceMs?: number;
  /** Also signal the process group led by the root (a worker started detached leads its own group). @default false */
  group?: boolean;
  /** How long to wait for everything to be gone after SIGKILL. @default 5000 */
  settleMs?: number;
  /** Skip SIGTERM and kill at once (a stalled process cannot clean up anyway). @default false */
  immediate?: boolean;
}

/**
 * Terminate `rootPid` and its whole tree (see the module comment).
 * @returns whether everything was gone before `settleMs` ran out after SIGKILL.
 */
export async function terminateTree(rootPid: number, options: TerminateOptions = {}): Promise<boolean> {
  const graceMs = options.graceMs ?? 5000;
  const settleMs = options.settleMs ?? 5000;
  let pids = [rootPid, ...(await descendants(rootPid))];
  const allGone = (): boolean => pids.every((p) => !isRunning(p)) && (options.group !== true || groupMembers(rootPid).length === 0);
  const send = (sig: NodeJS.Signals): void => {
    if (options.group === true) signal(-rootPid, sig);
    for (const p of pids) signal(p, sig);
  };
  if (options.immediate !== true) {
    send('SIGTERM');
    if (await waitUntil(allGone, graceMs)) return true;
    // Catch anything started during the grace.
    const more = await Promise.all(pids.filter(isRunning).map(descendants));
    pids = [...new Set([...pids, ...more.flat()])];
  }
  send('SIGKILL');
  return waitUntil(allGone, settleMs);
}

/** Poll `done` every 20 ms until it is true or `timeoutMs` passes. */
export async function waitUntil(done: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return true;
}
