/**
 * Running one program for an executor and turning how it ended into a result:
 * exit 0 → `ok` with its stdout; could not start → `COMMAND_NOT_FOUND`;
 * anything else → `failCode` with the exit status and the tail of stderr.
 */
import type { ErrorCode } from '../../protocol/errors.js';
import type { ExecutionResult } from '../../protocol/ipc.js';
import { commandRefusal } from '../policy.js';
import { runProcess } from '../run-process.js';
import type { ExecutorContext } from './context.js';

export interface ProgramRun {
  cmd: string;
  args: readonly string[];
  cwd: string;
  env?: Record<string, string>;
  input?: string;
  /** How the program is named in messages: `'npm test'`, `custom engine 'x'`. */
  label: string;
  failCode: ErrorCode;
}

export async function runProgram(program: ProgramRun, ctx: ExecutorContext): Promise<ExecutionResult> {
  const env = { ...ctx.programEnv, ...program.env };
  const refusal = commandRefusal(program.cmd, ctx.commands, program.cwd, { ...process.env, ...env });
  if (refusal !== undefined) return { type: 'error', code: 'POLICY_DENIED', message: `${program.label} was not started: ${refusal}` };
  const run = await runProcess(program.cmd, program.args, {
    cwd: program.cwd,
    env,
    ...(program.input === undefined ? {} : { input: program.input }),
    signal: ctx.signal,
    killGraceMs: ctx.killGraceMs,
    maxOutputBytes: ctx.maxOutputBytes,
    onStdout: (t) => ctx.progress('stdout', t),
    onStderr: (t) => ctx.progress('stderr', t),
  });
  const usage = { cpuMs: 0, tokensIn: 0, tokensOut: 0, costUsd: 0 };
  if (run.spawnError !== undefined) {
    return { type: 'error', code: 'COMMAND_NOT_FOUND', message: `cannot start ${program.label} in ${program.cwd}: ${run.spawnError.code}`, usage };
  }
  const outputBytes = run.stdout.totalBytes;
  if (run.exitCode === 0) return { type: 'ok', output: run.stdout.text(), outputBytes, usage };
  const how = run.exitCode === null ? `was killed by ${run.signal ?? 'a signal'}` : `exited with status ${run.exitCode}`;
  const tail = run.stderr.tail(20).trim();
  return {
    type: 'error',
    code: program.failCode,
    message: `${program.label} ${how}${tail === '' ? '' : `: ${tail.slice(-2000)}`}`,
    output: run.stdout.text(),
    outputBytes,
    usage,
    detail: { exitCode: run.exitCode, signal: run.signal },
  };
}
