/**
 * The `script` executor: import a module and call one of its functions with a
 * context, in a worker process or a worker thread.
 *
 * ```ts
 * export default async function build(ctx) {
 *   ctx.heartbeat('compiling');                       // optional; the runtime heartbeats on its own
 *   ctx.reportUsage({ tokensIn: 120, tokensOut: 40, costUsd: 0.002, model: 'm' });
 *   ctx.log('done', 42);
 *   if (ctx.signal.aborted) return;                   // stop when cancelled: past the grace, the worker is killed
 *   return { artifacts: 3 };                          // JSON: the node output
 * }
 * ```
 * `ctx` is `{ input, signal, heartbeat(progress?), reportUsage(usage), log(...values), cwd, attempt }`.
 * Relative paths in the function resolve against the worker's directory: use `ctx.cwd`.
 */
import { statSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { format } from 'node:util';
import { isJsonValue } from '../../protocol/fields.js';
import type { ExecutionResult, TaskOf } from '../../protocol/ipc.js';

/** What a script's context is made of, supplied by the process runtime or the thread entry. */
export interface ScriptHooks {
  signal: AbortSignal;
  heartbeat(progress?: string): void;
  reportUsage(usage: { tokensIn?: number; tokensOut?: number; costUsd?: number; model?: string }): void;
  log(text: string): void;
}

/** The context a script function receives. */
export interface ScriptContext {
  input: unknown;
  signal: AbortSignal;
  heartbeat(progress?: string): void;
  reportUsage(usage: { tokensIn?: number; tokensOut?: number; costUsd?: number; model?: string }): void;
  log(...values: unknown[]): void;
  cwd: string;
  attempt: number;
}

const usage = { cpuMs: 0, tokensIn: 0, tokensOut: 0, costUsd: 0 };

/** The largest output a script may return, in characters of JSON (8 Mi). */
export const MAX_SCRIPT_OUTPUT_CHARS = 8 * 1024 * 1024;

function failure(message: string): ExecutionResult {
  return { type: 'error', code: 'SCRIPT_FAILED', message, usage };
}

export async function executeScript(task: TaskOf<'script'>, hooks: ScriptHooks): Promise<ExecutionResult> {
  let mod: Record<string, unknown>;
  try {
    // A changed file is imported anew: warm workers must not run yesterday's code.
    // statSync: a worker runs one execution at a time, and an async stat costs a threadpool round trip per call.
    const { mtimeMs } = statSync(task.module);
    mod = (await import(`${pathToFileURL(task.module).href}?mtime=${mtimeMs}`)) as Record<string, unknown>;
  } catch (err) {
    return failure(`cannot load module ${task.module}: ${(err as NodeJS.ErrnoException).code ?? ''} ${(err as Error).message}`.trim());
  }
  const fn = mod[task.export];
  if (typeof fn !== 'function') return failure(`module ${task.module} has no function export '${task.export}' (found: ${Object.keys(mod).join(', ') || 'nothing'})`);
  const ctx: ScriptContext = {
    input: task.input,
    signal: hooks.signal,
    heartbeat: (progress) => hooks.heartbeat(progress === undefined ? undefined : String(progress)),
    reportUsage: (u) => hooks.reportUsage(u),
    log: (...values) => hooks.log(`${format(...values)}\n`),
    cwd: task.cwd,
    attempt: task.attempt,
  };
  let value: unknown;
  try {
    value = await (fn as (c: ScriptContext) => unknown)(ctx);
  } catch (err) {
    const e = err as Error & { code?: string };
    return failure(`${task.export}() threw${e.code === undefined ? '' : ` ${e.code}`}: ${e.message ?? String(err)}${e.stack === undefined ? '' : `\n${e.stack.split('\n').slice(1, 6).join('\n')}`}`);
  }
  if (value === undefined) return { type: 'ok', output: '', usage };
  if (!isJsonValue(value)) return failure(`${task.export}() returned a value that is not JSON (functions, BigInt, NaN and cycles are not)`);
  const output = JSON.stringify(value);
  if (output.length > MAX_SCRIPT_OUTPUT_CHARS) {
    return failure(`${task.export}() returned ${output.length} characters of JSON; the limit is ${MAX_SCRIPT_OUTPUT_CHARS} — write large results to a file and return its path`);
  }
  return { type: 'ok', output, usage };
}
