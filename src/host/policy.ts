/**
 * The host's half of the runtime policy: the ceiling, checking a spec against
 * it, choosing where an execution runs, and how its worker is started.
 */
import { createHash } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import which from 'which';
import type { Budget } from '../protocol/budget.js';
import type { ValidationIssue } from '../protocol/errors.js';
import { OPEN_CEILING, effectivePolicy, envCovered, narrow, policyFingerprint, policyProblems, restrictsFs, type EffectivePolicy, type Policy } from '../protocol/policy.js';
import type { WorkflowNode, WorkflowSpec } from '../protocol/spec.js';
import type { WorkerSpec } from './pool/execution.js';

/** The host's ceiling: everything, narrowed by the host's configured `policy`. */
export function compileCeiling(hostPolicy: Policy | undefined): EffectivePolicy {
  return narrow(OPEN_CEILING, hostPolicy);
}

function resolveCommand(command: string): string {
  const found = isAbsolute(command) ? command : which.sync(command, { nothrow: true });
  if (found === null) return command;
  try {
    return realpathSync(found);
  } catch {
    return found;
  }
}

const resolvedAllowLists = new Map<string, string[]>();

/**
 * The real paths of a policy's `commands`, resolved on the host's own PATH
 * (`['*']` stays as is). Entries that resolve to nothing allow nothing.
 */
export function resolveAllowList(commands: readonly string[]): string[] {
  if (commands.includes('*')) return ['*'];
  const key = `${process.env.PATH ?? ''}\0${commands.join('\0')}`;
  let list = resolvedAllowLists.get(key);
  if (list === undefined) {
    list = [...new Set(commands.map(resolveCommand).filter((p) => isAbsolute(p)))];
    resolvedAllowLists.set(key, list);
  }
  return list;
}

/** Whether two command entries name the same executable on this host. */
export function sameCommand(a: string, b: string): boolean {
  return a === b || resolveCommand(a) === resolveCommand(b);
}

/** Nodes whose executions run in a worker, with the fields that decide where and how. */
type ExecNode = Extract<WorkflowNode, { policy?: Policy }>;

function isExec(node: WorkflowNode): node is ExecNode {
  return 'isolation' in node || ['command', 'agent', 'fanout', 'verifier', 'script'].includes(node.kind);
}

/**
 * Every place a spec (and its inline subflows) asks for more than `bound`
 * allows, and every explicit thread the policy could not hold, as issues
 * naming the field.
 */
export function specPolicyIssues(spec: WorkflowSpec, bound: EffectivePolicy, at = ''): ValidationIssue[] {
  const field = (p: string): string => (at === '' ? p : `${at}.${p}`);
  const issues = spec.policy === undefined ? [] : policyProblems(spec.policy, bound, field('policy'), sameCommand);
  const specBound = narrow(bound, spec.policy);
  spec.contract?.checks.forEach((check, k) => {
    for (const name of Object.keys((check.type === 'command' ? check.env : undefined) ?? {})) {
      if (!envCovered(specBound.env.allow, name)) issues.push({ path: field(`contract.checks[${k}].env.${name}`), message: `'${name}' may not be given to a program: the policy does not allow it (env.allow: ${specBound.env.allow.join(', ')})` });
    }
  });
  spec.nodes.forEach((node, i) => {
    if (node.kind === 'subflow' && typeof node.workflow === 'object') issues.push(...specPolicyIssues(node.workflow, specBound, field(`nodes[${i}].workflow`)));
    if (!isExec(node)) return;
    if (node.policy !== undefined) issues.push(...policyProblems(node.policy, specBound, field(`nodes[${i}].policy`), sameCommand));
    issues.push(...envNameIssues(node, narrow(specBound, node.policy), field(`nodes[${i}]`)));
    if (node.isolation === 'thread') {
      const policy = effectivePolicy(bound, spec.policy, node.policy);
      if (restrictsFs(policy)) issues.push({ path: field(`nodes[${i}].isolation`), message: "a thread cannot hold a fs policy (Node's permission model is per process); run it in a 'process'" });
      const children = childProcessesSetting(bound, spec.policy, node.policy);
      if (children === false) issues.push({ path: field(`nodes[${i}].isolation`), message: "a thread cannot deny child processes (Node's permission model is per process); run it in a 'process'" });
      if (children === true) issues.push({ path: field(`nodes[${i}].isolation`), message: "a thread cannot stop the processes it starts with it; a script that starts processes runs in a 'process'" });
    }
  });
  return issues;
}

/** Every variable a node gives its programs by name (its `env`, its checks' `env`, its engines' `env`) must be one the env policy allows, like `env.set`. */
function envNameIssues(node: ExecNode, bound: EffectivePolicy, at: string): ValidationIssue[] {
  const named: Array<[string, Record<string, string> | undefined]> = [];
  if (node.kind === 'command') named.push([`${at}.env`, node.env]);
  if (node.kind === 'agent') named.push([`${at}.customEngine.env`, node.customEngine?.env]);
  if (node.kind === 'fanout') {
    node.agents.forEach((m, j) => named.push([`${at}.agents[${j}].customEngine.env`, m.customEngine?.env]));
    named.push([`${at}.synthesizer.customEngine.env`, node.synthesizer?.customEngine?.env]);
  }
  if (node.kind === 'verifier' && node.contract !== 'run') {
    node.contract.checks.forEach((c, k) => {
      if (c.type === 'command') named.push([`${at}.contract.checks[${k}].env`, c.env]);
    });
  }
  const issues: ValidationIssue[] = [];
  for (const [path, env] of named) {
    for (const name of Object.keys(env ?? {})) {
      if (!envCovered(bound.env.allow, name)) issues.push({ path: `${path}.${name}`, message: `'${name}' may not be given to a program: the policy does not allow it (env.allow: ${bound.env.allow.join(', ')})` });
    }
  }
  return issues;
}

/** Whether some level decides `childProcesses` (the ceiling only when it denies them), and how. */
export function childProcessesSetting(ceiling: EffectivePolicy, spec: Policy | undefined, node: Policy | undefined): boolean | undefined {
  return node?.childProcesses ?? spec?.childProcesses ?? (ceiling.childProcesses ? undefined : false);
}

/**
 * Where an execution runs: the node's `isolation` if set; a `script` runs in a
 * thread unless its budget limits CPU or memory, or its policy limits the file
 * system or decides on child processes — none of which a thread can hold, as
 * Node's permission model and process accounting are per process. Everything
 * else runs in a process.
 */
export function isolationOf(node: WorkflowNode, budget: Budget, policy: EffectivePolicy, children: boolean | undefined): 'process' | 'thread' {
  if (isExec(node) && node.isolation !== undefined) return node.isolation;
  if (node.kind !== 'script') return 'process';
  if (budget.cpuMs !== undefined || budget.rssMb !== undefined || restrictsFs(policy) || children !== undefined) return 'process';
  return 'thread';
}

/** The environment a worker under `policy` gets: the host variables it allows, then the ones it sets. */
export function workerEnv(policy: EffectivePolicy, hostEnv: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(hostEnv)) if (value !== undefined && envCovered(policy.env.allow, name)) env[name] = value;
  return { ...env, ...policy.env.set };
}

/** The root of this package (what a worker must be able to read to run at all). */
const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * Node's permission flags for a script worker process: read the package and
 * the script module plus `fs.read`, write `fs.write`, and start processes or
 * threads only if `childProcesses`.
 */
export function permissionFlags(policy: EffectivePolicy, moduleFile: string): string[] {
  // One flag per path: Node 20.20 no longer takes comma-separated lists.
  const each = (flag: string, paths: readonly string[]): string[] => (paths.includes('/') ? [`${flag}=*`] : paths.map((p) => `${flag}=${p}`));
  const flags = ['--experimental-permission', '--disable-warning=ExperimentalWarning', ...each('--allow-fs-read', policy.fs.read.includes('/') ? ['/'] : [PACKAGE_ROOT, moduleFile, ...policy.fs.read])];
  flags.push(...each('--allow-fs-write', policy.fs.write));
  if (policy.childProcesses) flags.push('--allow-child-process', '--allow-worker');
  return flags;
}

/**
 * Variables that change how a program — above all a Node process — loads and
 * runs: they never reach a worker process (they could inject code into it, or
 * lift its permission flags), only the programs it starts.
 */
export const PROGRAM_ONLY_ENV: readonly string[] = ['NODE_OPTIONS', 'NODE_PATH', 'LD_PRELOAD', 'LD_AUDIT', 'LD_LIBRARY_PATH', 'DYLD_INSERT_LIBRARIES', 'DYLD_LIBRARY_PATH'];

/** Split an environment into what a worker process may hold and what only its programs get. */
export function splitProgramEnv(env: Record<string, string>): { worker: Record<string, string>; programs: Record<string, string> } {
  const worker: Record<string, string> = {};
  const programs: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) (PROGRAM_ONLY_ENV.includes(name) ? programs : worker)[name] = value;
  return { worker, programs };
}

/**
 * How to start (or which warm worker may take) an execution. A `script` runs
 * user code inside its worker, so its workers are its run's own: they are
 * never shared with another run, nor with runwarden's own work (commands,
 * engines, verifiers), whose workers never run user code in-process.
 */
export function workerSpec(runId: string, node: WorkflowNode, isolation: 'process' | 'thread', policy: EffectivePolicy, budget: Budget, moduleFile?: string): WorkerSpec {
  const { worker: env, programs } = splitProgramEnv(workerEnv(policy));
  const owner = node.kind === 'script' ? `script:${runId}` : 'runtime';
  if (isolation === 'thread') {
    const spec: WorkerSpec = { key: `thread:${owner}:${policyFingerprint(policy)}:${budget.rssMb ?? '-'}`, env, programEnv: programs, execArgv: [] };
    if (budget.rssMb !== undefined) spec.heapMb = budget.rssMb;
    return spec;
  }
  // Only a script runs its code inside the worker: only its worker needs the permission model.
  const permissioned = node.kind === 'script' && moduleFile !== undefined && (restrictsFs(policy) || !policy.childProcesses);
  const execArgv = permissioned ? permissionFlags(policy, moduleFile) : [];
  const flagsKey = execArgv.length === 0 ? '-' : createHash('sha256').update(execArgv.join('\0')).digest('hex').slice(0, 12);
  return { key: `process:${owner}:${policyFingerprint(policy)}:${flagsKey}`, env, programEnv: programs, execArgv };
}
