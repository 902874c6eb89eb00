/**
 * Failpoints: named places in the store and kernel where a test can crash or
 * fail the process on purpose. Compiled in, off unless `RUNWARDEN_FAILPOINTS`
 * names them, and free when off (one boolean check).
 *
 * Syntax: comma-separated `name[:label][=action][@n|@n+]`. Actions: `crash`
 * (the default) sends the process SIGKILL, so nothing is cleaned up; `throw`
 * raises a {@link FailpointError}; `enospc` and `eacces` raise the file-system
 * error a full or read-only disk would. `@n` fires on the n-th hit only
 * (default 1), `@n+` on every hit from the n-th on. A label narrows a
 * failpoint to one node: `kernel.after-node-started:verify`.
 *
 * @example RUNWARDEN_FAILPOINTS='commit.after-publish@3' runwarden run spec.json --wait
 */

/** The failpoints the code defines. */
export const FAILPOINTS = [
  'commit.before-stage',
  'commit.after-stage',
  'commit.after-publish',
  'commit.mid-apply',
  'commit.after-apply',
  'lease.acquire',
  'lease.renew',
  'lease.release',
  'kernel.after-node-started',
  'kernel.before-result-commit',
] as const;
export type FailpointName = (typeof FAILPOINTS)[number];

/** Raised by a failpoint whose action is `throw`. */
export class FailpointError extends Error {
  constructor(readonly failpoint: string) {
    super(`failpoint ${failpoint} fired`);
    this.name = 'FailpointError';
  }
}

type Action = 'crash' | 'throw' | 'enospc' | 'eacces';

interface Armed {
  name: string;
  label: string | undefined;
  action: Action;
  at: number;
  onwards: boolean;
  hits: number;
}

let armed: Armed[] | undefined;

function parse(spec: string): Armed[] {
  return spec
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map((entry) => {
      const m = /^([a-z.-]+)(?::([^=@]+))?(?:=(crash|throw|enospc|eacces))?(?:@(\d+)(\+)?)?$/.exec(entry);
      if (m === null || !(FAILPOINTS as readonly string[]).includes(m[1]!)) {
        throw new Error(`RUNWARDEN_FAILPOINTS: cannot parse '${entry}'; expected name[:label][=crash|throw|enospc|eacces][@n|@n+] with name one of ${FAILPOINTS.join(', ')}`);
      }
      return { name: m[1]!, label: m[2], action: (m[3] ?? 'crash') as Action, at: Number(m[4] ?? 1), onwards: m[5] === '+', hits: 0 };
    });
}

/** Hit a failpoint. Does nothing unless `RUNWARDEN_FAILPOINTS` arms it. */
export function failpoint(name: FailpointName, label?: string): void {
  armed ??= parse(process.env.RUNWARDEN_FAILPOINTS ?? '');
  if (armed.length === 0) return;
  for (const fp of armed) {
    if (fp.name !== name || (fp.label !== undefined && fp.label !== label)) continue;
    fp.hits += 1;
    if (fp.onwards ? fp.hits < fp.at : fp.hits !== fp.at) continue;
    const where = label === undefined ? name : `${name}:${label}`;
    if (fp.action === 'throw') throw new FailpointError(where);
    if (fp.action === 'enospc' || fp.action === 'eacces') {
      throw Object.assign(new Error(`${fp.action.toUpperCase()}: injected at failpoint ${where}`), { code: fp.action.toUpperCase() });
    }
    process.kill(process.pid, 'SIGKILL');
  }
}
