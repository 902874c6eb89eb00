/**
 * The `verify` executor: run a contract's checks in the run's cwd (argv, never
 * a shell string), then digest the working tree they ran against. Passes when
 * every required check passes.
 */
import { open, realpath, stat } from 'node:fs/promises';
import { isAbsolute, relative, resolve } from 'node:path';
import type { Check } from '../../protocol/spec.js';
import type { CheckResult, ExecutionResult, TaskOf } from '../../protocol/ipc.js';
import { commandRefusal } from '../policy.js';
import { runProcess } from '../run-process.js';
import type { ExecutorContext } from './context.js';
import { workspaceDigest } from './digest.js';

/** At most this much of a file is searched by a `matches` check. */
export const FILE_CHECK_MAX_BYTES = 1_048_576;
/** At most this much check output is kept in evidence. */
const TAIL_BYTES = 65_536;
const TAIL_LINES = 200;

export async function executeVerify(task: TaskOf<'verify'>, ctx: ExecutorContext): Promise<ExecutionResult> {
  const started = performance.now();
  const results: CheckResult[] = [];
  for (const check of task.checks) {
    if (ctx.signal.aborted) break;
    ctx.progress('log', `check ${check.id ?? check.type}: running\n`);
    const result = check.type === 'command' ? await commandCheck(check, task.cwd, ctx) : await fileCheck(check, task.cwd);
    ctx.progress('log', `check ${result.id}: ${result.passed ? 'passed' : 'failed'} (${result.detail})\n`);
    results.push(result);
  }
  const { digest, head } = await workspaceDigest(task.cwd, task.scope, ctx.signal);
  const failed = results.filter((r) => r.required && !r.passed);
  const passed = failed.length === 0 && results.length === task.checks.length;
  const verify = { passed, results, digest, head };
  const usage = { cpuMs: 0, tokensIn: 0, tokensOut: 0, costUsd: 0 };
  const summary = `${results.filter((r) => r.passed).length} of ${results.length} checks passed in ${Math.round(performance.now() - started)} ms`;
  if (passed) return { type: 'ok', output: summary, usage, verify };
  return {
    type: 'error',
    code: 'CHECKS_FAILED',
    message: `${failed.length} required check${failed.length === 1 ? '' : 's'} failed: ${failed.map((r) => `${r.id} (${r.detail})`).join('; ')}`,
    output: summary,
    usage,
    verify,
  };
}

async function commandCheck(check: Extract<Check, { type: 'command' }>, cwd: string, ctx: ExecutorContext): Promise<CheckResult> {
  const checkCwd = resolve(cwd, check.cwd ?? '.');
  const env = { ...ctx.programEnv, ...check.env };
  const refusal = commandRefusal(check.cmd, ctx.commands, checkCwd, { ...process.env, ...env });
  if (refusal !== undefined) {
    return { id: check.id ?? 'command', type: 'command', required: check.required, durationMs: 0, command: [check.cmd, ...check.args], passed: false, detail: `not started: ${refusal}`, exitCode: null };
  }
  const run = await runProcess(check.cmd, check.args, {
    cwd: checkCwd,
    env,
    signal: ctx.signal,
    timeoutMs: check.timeoutMs,
    killGraceMs: ctx.killGraceMs,
    maxOutputBytes: TAIL_BYTES,
  });
  const base = { id: check.id ?? 'command', type: 'command' as const, required: check.required, durationMs: Math.round(run.durationMs), command: [check.cmd, ...check.args] };
  if (run.spawnError !== undefined) return { ...base, passed: false, detail: `cannot start '${check.cmd}': ${run.spawnError.code}`, exitCode: null };
  const detail = run.timedOut
    ? `timed out after ${check.timeoutMs} ms`
    : run.cancelled
      ? 'cancelled'
      : run.exitCode === null
        ? `killed by ${run.signal ?? 'a signal'}`
        : `exit ${run.exitCode}, expected ${check.expectExit}`;
  return {
    ...base,
    passed: !run.timedOut && !run.cancelled && run.exitCode === check.expectExit,
    detail,
    exitCode: run.exitCode,
    timedOut: run.timedOut,
    outputTail: run.all.tail(TAIL_LINES),
  };
}

async function fileCheck(check: Extract<Check, { type: 'file' }>, cwd: string): Promise<CheckResult> {
  const started = performance.now();
  const base = { id: check.id ?? 'file', type: 'file' as const, required: check.required };
  const done = (passed: boolean, detail: string): CheckResult => ({ ...base, passed, detail, durationMs: Math.round(performance.now() - started) });
  const path = resolve(cwd, check.path);
  let real: string;
  try {
    real = await realpath(path);
  } catch {
    return check.exists ? done(false, `${check.path} does not exist`) : done(true, `${check.path} does not exist, as required`);
  }
  const rel = relative(await realpath(cwd), real);
  if (rel.startsWith('..') || isAbsolute(rel)) return done(false, `${check.path} resolves outside the run cwd`);
  if (!check.exists) return done(false, `${check.path} exists but must not`);
  if (check.matches === undefined) return done(true, `${check.path} exists`);
  const info = await stat(real);
  if (!info.isFile()) return done(false, `${check.path} is not a regular file`);
  const fh = await open(real, 'r');
  let text: string;
  try {
    const buf = Buffer.alloc(Math.min(info.size, FILE_CHECK_MAX_BYTES));
    await fh.read(buf, 0, buf.length, 0);
    text = buf.toString('utf8');
  } finally {
    await fh.close();
  }
  const matched = new RegExp(check.matches, 'm').test(text);
  const scope = info.size > FILE_CHECK_MAX_BYTES ? ` (first ${FILE_CHECK_MAX_BYTES} bytes)` : '';
  return matched ? done(true, `${check.path} matches /${check.matches}/${scope}`) : done(false, `${check.path} does not match /${check.matches}/${scope}`);
}
