/**
 * The `custom` engine: any CLI that takes a prompt and prints its answer.
 * `args` may contain `{prompt}`, `{cwd}` and `{model}`; with `promptVia: 'arg'`
 * and no `{prompt}` placeholder the prompt is appended as the last argument.
 * The engine's `env` (a secret) is added to the CLI's environment only.
 */
import type { ExecutionResult, TaskOf } from '../../protocol/ipc.js';
import type { ExecutorContext } from '../executors/context.js';
import { runProcess } from '../run-process.js';

/** Expand `{prompt}`, `{cwd}` and `{model}` in one argument. Unknown placeholders stay as written. */
export function expandArg(arg: string, values: { prompt: string; cwd: string; model: string }): string {
  return arg.replace(/\{(prompt|cwd|model)\}/g, (_, key: 'prompt' | 'cwd' | 'model') => values[key]);
}

/** The argv a custom engine is started with. */
export function customEngineArgv(task: TaskOf<'agent'>): string[] {
  const engine = task.customEngine!;
  const values = { prompt: task.prompt, cwd: task.cwd, model: task.model ?? '' };
  const args = engine.args.map((a) => expandArg(a, values));
  if (engine.promptVia === 'arg' && !engine.args.some((a) => a.includes('{prompt}'))) args.push(task.prompt);
  return args;
}

export async function runCustomEngine(task: TaskOf<'agent'>, ctx: ExecutorContext): Promise<ExecutionResult> {
  const engine = task.customEngine;
  if (engine === undefined) return { type: 'error', code: 'EXECUTOR_FAILED', message: "engine 'custom' dispatched without customEngine" };
  const run = await runProcess(engine.bin, customEngineArgv(task), {
    cwd: task.cwd,
    env: { ...engine.env, RUNWARDEN_SESSION: task.session },
    ...(engine.promptVia === 'stdin' ? { input: task.prompt } : {}),
    signal: ctx.signal,
    killGraceMs: ctx.killGraceMs,
    maxOutputBytes: ctx.maxOutputBytes,
    onStdout: (t) => ctx.progress('stdout', t),
    onStderr: (t) => ctx.progress('stderr', t),
  });
  const usage = { cpuMs: 0, tokensIn: 0, tokensOut: 0, costUsd: 0 };
  if (run.spawnError !== undefined) {
    return { type: 'error', code: 'COMMAND_NOT_FOUND', message: `cannot start custom engine '${engine.bin}': ${run.spawnError.code}`, usage };
  }
  if (run.exitCode === 0) return { type: 'ok', output: run.stdout.text(), usage };
  const how = run.exitCode === null ? `was killed by ${run.signal ?? 'a signal'}` : `exited with status ${run.exitCode}`;
  const tail = run.stderr.tail(20).trim();
  return {
    type: 'error',
    code: 'ENGINE_FAILED',
    message: `custom engine '${engine.bin}' ${how}${tail === '' ? '' : `: ${tail.slice(-2000)}`}`,
    output: run.stdout.text(),
    usage,
    detail: { exitCode: run.exitCode, signal: run.signal },
  };
}
