/**
 * Failpoints: named places in the store and kernel where a test can crash or
 * fail the process on purpose. Compiled in, off unless `RUNWARDEN_FAILPOINTS`
 * names them, and free when off (one boolean check).
 *
 * Syntax: comma-separated `name[:label][=crash|throw][@n]`. `crash` (the
 * default) sends the process SIGKILL, so nothing is cleaned up; `throw` raises
 * a {@link FailpointError}. `@n` fires on the n-th hit only (default 1).
 * A label narrows a failpoint to one node: `kernel.after-node-started:verify`.
 *
 * @example RUNWARDEN_FAILPOINTS='commit.after-publish@3' runwarden run spec.json --wait
 */

/** The failpoints the code defines. */
export const FAILPOINTS = [
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

interface Armed {
  name: string;
  label: string | undefined;
  action: 'crash' | 'throw';
  at: number;
  hits: number;
}

let armed: Armed[] | undefined;

function parse(spec: string): Armed[] {
  return spec
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '')
    .map((entry) => {
      const m = /^([a-z.-]+)(?::([^=@]+))?(?:=(crash|throw))?(?:@(\d+))?$/.exec(entry);
      if (m === null || !(FAILPOINTS as readonly string[]).includes(m[1]!)) {
        throw new Error(`RUNWARDEN_FAILPOINTS: cannot parse '${entry}'; expected name[:label][=crash|throw][@n] with name one of ${FAILPOINTS.join(', ')}`);
      }
      return { name: m[1]!, label: m[2], action: (m[3] ?? 'crash') as 'crash' | 'throw', at: Number(m[4] ?? 1), hits: 0 };
    });
}

/** Hit a failpoint. Does nothing unless `RUNWARDEN_FAILPOINTS` arms it. */
export function failpoint(name: FailpointName, label?: string): void {
  armed ??= parse(process.env.RUNWARDEN_FAILPOINTS ?? '');
  if (armed.length === 0) return;
  for (const fp of armed) {
    if (fp.name !== name || (fp.label !== undefined && fp.label !== label)) continue;
    fp.hits += 1;
    if (fp.hits !== fp.at) continue;
    if (fp.action === 'throw') throw new FailpointError(label === undefined ? name : `${name}:${label}`);
    process.kill(process.pid, 'SIGKILL');
  }
}
