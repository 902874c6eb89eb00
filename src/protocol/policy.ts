/**
 * Runtime policy: what an execution may touch.
 *
 * - `env.allow`: the host variables passed to the worker (names, `PREFIX_*`, or
 *   `*`); `env.set`: variables set explicitly. Default: PATH, HOME, LANG, TERM
 *   and TMPDIR only — other host variables, secrets above all, never reach a
 *   worker unless named.
 * - `fs.read` / `fs.write`: paths (relative ones against the run cwd).
 *   Enforced by Node's permission model for `script` nodes in process
 *   isolation; for every execution the working directory must be readable.
 * - `commands`: the executables a command, check or engine may start (names,
 *   resolved on PATH, or absolute paths; `*` for any), checked against the
 *   resolved path before spawning.
 * - `childProcesses`: whether a `script` may start processes or threads
 *   (default false).
 *
 * Three levels: the host's ceiling (host config `policy`), the spec's
 * `policy`, the node's `policy`. Each level may narrow the one above, never
 * widen it: a spec asking for more is rejected at validation, naming the field.
 */
import { createHash } from 'node:crypto';
import { isAbsolute, relative, resolve, sep } from 'node:path';
import { z } from 'zod';
import type { ValidationIssue } from './errors.js';
import { envMap, nonEmpty } from './fields.js';

const envPattern = z.string().regex(/^(\*|[A-Za-z_][A-Za-z0-9_]*\*?)$/, 'must be a variable name, a prefix ending in *, or *');

export const PolicySchema = z.strictObject({
  env: z.strictObject({ allow: z.array(envPattern).optional(), set: envMap.optional() }).optional(),
  fs: z.strictObject({ read: z.array(nonEmpty).optional(), write: z.array(nonEmpty).optional() }).optional(),
  commands: z.array(nonEmpty.refine((c) => c === '*' || !c.includes('/') || c.startsWith('/'), 'must be a program name, an absolute path, or * (a relative path would mean a different program in each directory)')).optional(),
  childProcesses: z.boolean().optional(),
});
export type Policy = z.infer<typeof PolicySchema>;

/** A policy with every field decided. fs paths are absolute; `/` means everywhere, `*` any command. */
export interface EffectivePolicy {
  env: { allow: string[]; set: Record<string, string> };
  fs: { read: string[]; write: string[] };
  commands: string[];
  childProcesses: boolean;
}

/** Host variables a worker sees when no policy names others. */
export const DEFAULT_ENV_ALLOW: readonly string[] = ['PATH', 'HOME', 'LANG', 'TERM', 'TMPDIR'];

/** The ceiling of a host that configures none: everything is allowed, and specs narrow from there. */
export const OPEN_CEILING: EffectivePolicy = { env: { allow: ['*'], set: {} }, fs: { read: ['/'], write: ['/'] }, commands: ['*'], childProcesses: true };

/** Resolve a policy's relative fs paths against `baseDir`. */
export function absolutePolicy(policy: Policy, baseDir: string): Policy {
  if (policy.fs === undefined) return policy;
  const abs = (paths: string[] | undefined): string[] | undefined => paths?.map((p) => resolve(baseDir, p));
  const fs: NonNullable<Policy['fs']> = {};
  const read = abs(policy.fs.read);
  const write = abs(policy.fs.write);
  if (read !== undefined) fs.read = read;
  if (write !== undefined) fs.write = write;
  return { ...policy, fs };
}

/** Whether env pattern `wanted` (a name or `PREFIX_*`) is covered by one of `patterns`. */
export function envCovered(patterns: readonly string[], wanted: string): boolean {
  return patterns.some((p) => {
    if (p === '*') return true;
    if (!p.endsWith('*')) return p === wanted;
    const prefix = p.slice(0, -1);
    return wanted.startsWith(prefix) && (wanted !== '*' || prefix === '');
  });
}

/** Whether `path` lies within one of `roots` (absolute paths). */
export function pathCovered(roots: readonly string[], path: string): boolean {
  return roots.some((root) => {
    const rel = relative(root, path);
    return rel === '' || (rel !== '..' && !rel.startsWith(`..${sep}`) && !isAbsolute(rel));
  });
}

/**
 * Where `requested` asks for more than `bound` allows, each as an issue naming
 * the field under `at`. `sameCommand` decides whether two command entries name
 * the same executable (the host resolves names on its PATH).
 */
export function policyProblems(requested: Policy, bound: EffectivePolicy, at: string, sameCommand: (a: string, b: string) => boolean): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  const field = (p: string): string => (at === '' ? p : `${at}.${p}`);
  requested.env?.allow?.forEach((name, i) => {
    if (!envCovered(bound.env.allow, name)) issues.push({ path: field(`env.allow[${i}]`), message: `'${name}' is not allowed by the policy above (env.allow: ${bound.env.allow.join(', ')})` });
  });
  for (const name of Object.keys(requested.env?.set ?? {})) {
    if (!envCovered(bound.env.allow, name)) issues.push({ path: field(`env.set.${name}`), message: `'${name}' may not be set: the policy above does not allow it (env.allow: ${bound.env.allow.join(', ')})` });
  }
  for (const kind of ['read', 'write'] as const) {
    requested.fs?.[kind]?.forEach((path, i) => {
      if (!pathCovered(bound.fs[kind], path)) issues.push({ path: field(`fs.${kind}[${i}]`), message: `${path} is outside the paths the policy above allows (fs.${kind}: ${bound.fs[kind].join(', ')})` });
    });
  }
  if (!bound.commands.includes('*')) {
    requested.commands?.forEach((command, i) => {
      if (!bound.commands.some((allowed) => sameCommand(allowed, command))) {
        issues.push({ path: field(`commands[${i}]`), message: `'${command}' is not among the commands the policy above allows (${bound.commands.join(', ')})` });
      }
    });
  }
  if (requested.childProcesses === true && !bound.childProcesses) issues.push({ path: field('childProcesses'), message: 'the policy above does not allow child processes' });
  return issues;
}

/** The bound a level gives the level below it: its own fields where it sets them, the bound above elsewhere. */
export function narrow(bound: EffectivePolicy, level: Policy | undefined): EffectivePolicy {
  if (level === undefined) return bound;
  return {
    env: { allow: level.env?.allow ?? bound.env.allow, set: { ...bound.env.set, ...level.env?.set } },
    fs: { read: level.fs?.read ?? bound.fs.read, write: level.fs?.write ?? bound.fs.write },
    commands: level.commands ?? bound.commands,
    childProcesses: level.childProcesses ?? bound.childProcesses,
  };
}

/**
 * The effective policy of an execution: the most specific level that sets a
 * field decides it; env falls back to {@link DEFAULT_ENV_ALLOW} (within the
 * ceiling) and `childProcesses` to false when no level sets them.
 */
export function effectivePolicy(ceiling: EffectivePolicy, spec: Policy | undefined, node: Policy | undefined): EffectivePolicy {
  const bound = narrow(narrow(ceiling, spec), node);
  const allow = node?.env?.allow ?? spec?.env?.allow ?? DEFAULT_ENV_ALLOW.filter((name) => envCovered(ceiling.env.allow, name));
  const childProcesses = node?.childProcesses ?? spec?.childProcesses ?? false;
  return { ...bound, env: { allow: [...allow], set: bound.env.set }, childProcesses };
}

/** Whether the policy restricts the file system at all. */
export function restrictsFs(policy: EffectivePolicy): boolean {
  return !(policy.fs.read.includes('/') && policy.fs.write.includes('/'));
}

/** A short stable fingerprint of a policy, for keying workers. */
export function policyFingerprint(policy: EffectivePolicy): string {
  const canonical = JSON.stringify({
    env: { allow: [...policy.env.allow].sort(), set: Object.fromEntries(Object.entries(policy.env.set).sort()) },
    fs: { read: [...policy.fs.read].sort(), write: [...policy.fs.write].sort() },
    commands: [...policy.commands].sort(),
    childProcesses: policy.childProcesses,
  });
  return createHash('sha256').update(canonical).digest('hex').slice(0, 16);
}
