/**
 * The worker's half of the runtime policy: a program may start only if its
 * resolved real path is one of those the host resolved the policy's
 * `commands` to (on the host's own PATH, before the worker existed). The
 * program is resolved exactly as it will be spawned — on the PATH it will be
 * spawned with, against its working directory, through symlinks — so neither
 * a PATH set by the spec nor a look-alike file can pass for an allowed one.
 */
import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import which from 'which';

/** The real path `command` would run as, or undefined when it resolves to nothing. */
export function resolveProgram(command: string, cwd: string, path: string): string | undefined {
  const found = command.includes('/') ? resolve(cwd, command) : which.sync(command, { nothrow: true, path });
  if (found === null || found === undefined) return undefined;
  try {
    return realpathSync(found);
  } catch {
    return undefined;
  }
}

/**
 * Why `command` may not start, or undefined when it may.
 * @param allowed `['*']`, or the real paths of the allowed programs.
 * @param env the environment the program will be spawned with (its PATH decides).
 */
export function commandRefusal(command: string, allowed: readonly string[], cwd: string, env: Record<string, string | undefined>): string | undefined {
  if (allowed.includes('*')) return undefined;
  const path = resolveProgram(command, cwd, env.PATH ?? '');
  if (path === undefined) return `'${command}' does not resolve to a program (PATH ${env.PATH ?? '(unset)'}), so it cannot be checked against the commands the policy allows`;
  if (allowed.includes(path)) return undefined;
  return `'${command}' (${path}) is not among the commands the policy allows`;
}
