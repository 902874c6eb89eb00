/**
 * The `custom` engine: any CLI that takes a prompt and prints its answer.
 * `args` may contain `{prompt}`, `{cwd}` and `{model}`; with `promptVia: 'arg'`
 * and no `{prompt}` placeholder the prompt is appended as the last argument.
 * The engine's `env` (a secret) is added to the CLI's environment only.
 */
import type { ExecutionResult, TaskOf } from '../../protocol/ipc.js';
import type { ExecutorContext } from '../executors/context.js';
import { runProgram } from '../executors/program.js';

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
  return runProgram(
    {
      cmd: engine.bin,
      args: customEngineArgv(task),
      cwd: task.cwd,
      env: { ...engine.env, RUNWARDEN_SESSION: task.session },
      ...(engine.promptVia === 'stdin' ? { input: task.prompt } : {}),
      label: `custom engine '${engine.bin}'`,
      failCode: 'ENGINE_FAILED',
    },
    ctx,
  );
}
