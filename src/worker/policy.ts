/**
 * The worker's half of the runtime policy: an executable may start only if
 * its resolved path is one the policy's `commands` resolve to. Names resolve
 * on the worker's PATH (the policy's env), paths against the working
 * directory, both through symlinks, so `./git` or a look-alike earlier on
 * PATH is not mistaken for the `git` the policy means.
 */
import { realpathSync } from 'node:fs';
import { resolve } from 'node:path';
import which from 'which';

function resolveExecutable(command: string, cwd: string): string | undefined {
  const found = command.includes('/') ? resolve(cwd, command) : which.sync(command, { nothrow: true, path: process.env.PATH ?? '' });
  if (found === null || found === undefined) return undefined;
  try {
    return realpathSync(found);
  } catch {
    return undefined;
  }
}

const allowCache = new Map<string, Set<string>>();

function resolvedAllowList(allow: readonly string[], cwd: string): Set<string> {
  const key = `${process.env.PATH ?? ''}\0${allow.join('\0')}`;
  let set = allowCache.get(key);
  if (set === undefined) {
    set = new Set(allow.map((entry) => resolveExecutable(entry, cwd)).filter((p): p is string => p !== undefined));
    allowCache.set(key, set);
  }
  return set;
}

/**
 * Why `command` may not start under the allow-list, or undefined when it may.
 * A command that resolves to nothing is left to fail at spawn (`COMMAND_NOT_FOUND`).
 */
export function commandRefusal(command: string, allow: readonly string[], cwd: string): string | undefined {
  if (allow.includes('*')) return undefined;
  const path = resolveExecutable(command, cwd);
  if (path === undefined) return undefined;
  if (resolvedAllowList(allow, cwd).has(path)) return undefined;
  return `'${command}' (${path}) is not among the commands the policy allows (${allow.join(', ')})`;
}
