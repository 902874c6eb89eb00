/**
 * Turning user input into the spec a run executes: read the file, validate,
 * resolve the working directories, load subflow spec files (relative to the
 * file that names them) and inline them, bound the nesting, refuse cycles,
 * compile, and split the secrets out.
 *
 * The result is immutable for the run: editing a subflow file after a run
 * started changes nothing for that run.
 */
import { existsSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, resolve } from 'node:path';
import { SpecError, type ValidationIssue } from '../protocol/errors.js';
import type { SecretRef } from '../protocol/events.js';
import { OPEN_CEILING, absolutePolicy, type EffectivePolicy, type Policy } from '../protocol/policy.js';
import { WorkflowSpecSchema, compileSpec, zodIssues, type CustomEngine, type WorkflowSpec } from '../protocol/spec.js';
import { specPolicyIssues } from './policy.js';

/** Secret env maps by reference (`/nodes/2/customEngine`), as held in memory only. */
export type SecretMap = ReadonlyMap<string, Record<string, string>>;

export interface LoadedSpec {
  /** Compiled, subflows inlined, cwd absolute, secrets removed: what `spec.json` holds. */
  spec: WorkflowSpec;
  secrets: SecretMap;
  secretRefs: SecretRef[];
}

export interface LoadSpecOptions {
  /** The directory relative paths in the spec resolve against (the spec file's directory). */
  baseDir: string;
  /** The cwd used when the spec sets none. @default process.cwd() */
  defaultCwd?: string;
  /** How deep subflows may nest. @default 8 */
  maxDepth?: number;
  /** The host's policy ceiling the spec's policies must stay within. @default everything */
  ceiling?: EffectivePolicy;
}

/**
 * Read and parse a spec file.
 * @throws {SpecError} `SPEC_INVALID` when the file cannot be read or is not JSON.
 */
export function readSpecFile(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new SpecError([{ path: '', message: `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` }], `spec file ${path}`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new SpecError([{ path: '', message: `not valid JSON: ${(err as Error).message}` }], `spec file ${path}`);
  }
}

/** Load a spec file: {@link loadSpec} with paths relative to the file. */
export function loadSpecFile(path: string, options: Omit<LoadSpecOptions, 'baseDir'> = {}): LoadedSpec {
  const abs = resolve(path);
  return loadSpec(readSpecFile(abs), { ...options, baseDir: dirname(abs) }, abs);
}

/**
 * Validate and prepare a spec (see the module comment).
 * @throws {SpecError} `SPEC_INVALID` listing every problem with its field path; nothing is written.
 */
export function loadSpec(input: unknown, options: LoadSpecOptions, sourceFile?: string): LoadedSpec {
  const maxDepth = options.maxDepth ?? 8;
  const defaultCwd = resolve(options.defaultCwd ?? process.cwd());
  const stack = sourceFile === undefined ? [] : [realpathSafe(sourceFile)];
  const spec = prepare(input, '', options.baseDir, defaultCwd, 0, maxDepth, stack);
  const policyIssues = specPolicyIssues(spec, options.ceiling ?? OPEN_CEILING);
  if (policyIssues.length > 0) throw new SpecError(policyIssues);
  const compiled = compileSpec(spec);
  const secrets = new Map<string, Record<string, string>>();
  const secretRefs: SecretRef[] = [];
  const stripped = stripSecrets(compiled, '', '', secrets, secretRefs);
  return { spec: stripped, secrets, secretRefs };
}

function prepare(input: unknown, at: string, baseDir: string, inheritedCwd: string, depth: number, maxDepth: number, stack: string[]): WorkflowSpec {
  const parsed = WorkflowSpecSchema.safeParse(input);
  if (!parsed.success) throw new SpecError(zodIssues(parsed.error, at));
  const spec = parsed.data;
  const field = (p: string): string => (at === '' ? p : `${at}.${p}`);
  const cwd = spec.cwd === undefined ? inheritedCwd : resolve(baseDir, spec.cwd);
  const problem = directoryProblem(cwd);
  if (problem !== undefined) throw new SpecError([{ path: field('cwd'), message: `${problem}: ${cwd}` }]);
  const issues: ValidationIssue[] = [];
  const withPolicy = <T extends { policy?: Policy }>(x: T): T => (x.policy === undefined ? x : { ...x, policy: absolutePolicy(x.policy, cwd) });
  const nodes = spec.nodes.map((raw, i) => {
    const node = 'policy' in raw ? withPolicy(raw) : raw;
    if (node.kind === 'script') {
      // The module is part of the run's definition: resolved now, relative to the file naming it.
      const module = node.module.startsWith('file:') ? fileURLToPath(node.module) : resolve(baseDir, node.module);
      if (!existsSync(module)) issues.push({ path: field(`nodes[${i}].module`), message: `cannot find ${module}` });
      return { ...node, module };
    }
    if (node.kind !== 'subflow') return node;
    const path = field(`nodes[${i}].workflow`);
    if (depth + 1 > maxDepth) {
      issues.push({ path, message: `subflows nest at most ${maxDepth} deep` });
      return node;
    }
    if (typeof node.workflow === 'object') {
      return { ...node, workflow: prepare(node.workflow, path, baseDir, cwd, depth + 1, maxDepth, stack) };
    }
    const file = resolve(baseDir, node.workflow);
    const real = realpathSafe(file);
    if (stack.includes(real)) {
      issues.push({ path, message: `subflow cycle: ${[...stack, real].join(' -> ')}` });
      return node;
    }
    let child: unknown;
    try {
      child = readSpecFile(file);
    } catch (err) {
      issues.push({ path, message: (err as SpecError).issues?.[0]?.message ?? (err as Error).message });
      return node;
    }
    try {
      return { ...node, workflow: prepare(child, path, dirname(file), cwd, depth + 1, maxDepth, [...stack, real]) };
    } catch (err) {
      if (!(err instanceof SpecError)) throw err;
      // Name the file an issue comes from, once: issues from deeper files already name theirs.
      issues.push(...err.issues.map((issue) => (/ \(in \/[^)]*\)$/.test(issue.message) || issue.message.startsWith('subflow cycle') ? issue : { path: issue.path, message: `${issue.message} (in ${file})` })));
      return node;
    }
  });
  if (issues.length > 0) throw new SpecError(issues);
  return withPolicy({ ...spec, cwd, nodes });
}

function directoryProblem(path: string): string | undefined {
  try {
    return statSync(path).isDirectory() ? undefined : 'is not a directory';
  } catch {
    return 'does not exist';
  }
}

function realpathSafe(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return resolve(path);
  }
}

/** Remove every customEngine `env` (recursively through subflows), recording where it was. */
function stripSecrets(spec: WorkflowSpec, ref: string, label: string, into: Map<string, Record<string, string>>, refs: SecretRef[]): WorkflowSpec {
  const take = (engine: CustomEngine | undefined, where: string, what: string): CustomEngine | undefined => {
    if (engine?.env === undefined) return engine;
    const { env, ...rest } = engine;
    if (Object.keys(env).length > 0) {
      into.set(where, env);
      refs.push({ ref: where, label: what, keys: Object.keys(env).sort() });
    }
    return rest;
  };
  const prefix = label === '' ? '' : `${label} › `;
  const nodes = spec.nodes.map((node, i) => {
    const at = `${ref}/nodes/${i}`;
    switch (node.kind) {
      case 'agent': {
        const customEngine = take(node.customEngine, `${at}/customEngine`, `${prefix}agent '${node.id}'`);
        return customEngine === undefined ? node : { ...node, customEngine };
      }
      case 'fanout': {
        const agents = node.agents.map((member, j) => {
          const customEngine = take(member.customEngine, `${at}/agents/${j}/customEngine`, `${prefix}fan-out '${node.id}' member '${member.name}'`);
          return customEngine === undefined ? member : { ...member, customEngine };
        });
        const synthCustom = take(node.synthesizer?.customEngine, `${at}/synthesizer/customEngine`, `${prefix}fan-out '${node.id}' synthesizer`);
        const synthesizer = node.synthesizer === undefined ? undefined : synthCustom === undefined ? node.synthesizer : { ...node.synthesizer, customEngine: synthCustom };
        return synthesizer === undefined ? { ...node, agents } : { ...node, agents, synthesizer };
      }
      case 'subflow':
        return typeof node.workflow === 'object' ? { ...node, workflow: stripSecrets(node.workflow, `${at}/workflow`, `${prefix}subflow '${node.id}'`, into, refs) } : node;
      default:
        return node;
    }
  });
  return { ...spec, nodes };
}

/** The secrets of a subflow's child run: the entries under `prefix`, re-rooted. */
export function childSecrets(secrets: SecretMap, prefix: string): Map<string, Record<string, string>> {
  const child = new Map<string, Record<string, string>>();
  for (const [ref, env] of secrets) if (ref.startsWith(`${prefix}/`)) child.set(ref.slice(prefix.length), env);
  return child;
}

/** Whether two stored specs are the same run definition (ignoring the top-level cwd, which depends on where a command ran). */
export function sameDefinition(a: WorkflowSpec, b: WorkflowSpec): boolean {
  return JSON.stringify({ ...a, cwd: undefined }) === JSON.stringify({ ...b, cwd: undefined });
}
