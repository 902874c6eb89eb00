/** The `command` executor: run a program; its stdout is the node output. */
import type { ExecutionResult, TaskOf } from '../../protocol/ipc.js';
import { runProcess } from '../run-process.js';
import type { ExecutorContext } from './context.js';

export async function executeCommand(task: TaskOf<'command'>, ctx: ExecutorContext): Promise<ExecutionResult> {
  const run = await runProcess(task.cmd, task.args, {
    cwd: task.cwd,
    ...(task.env === undefined ? {} : { env: task.env }),
    signal: ctx.signal,
    killGraceMs: ctx.killGraceMs,
    maxOutputBytes: ctx.maxOutputBytes,
    onStdout: (t) => ctx.progress('stdout', t),
    onStderr: (t) => ctx.progress('stderr', t),
  });
  const usage = { cpuMs: 0, tokensIn: 0, tokensOut: 0, costUsd: 0 };
  if (run.spawnError !== undefined) {
    return { type: 'error', code: 'COMMAND_NOT_FOUND', message: `cannot start '${task.cmd}' in ${task.cwd}: ${run.spawnError.code}`, usage };
  }
  if (run.exitCode === 0) return { type: 'ok', output: run.stdout.text(), usage };
  const how = run.exitCode === null ? `was killed by ${run.signal ?? 'a signal'}` : `exited with status ${run.exitCode}`;
  const stderrTail = run.stderr.tail(20).trim();
  return {
    type: 'error',
    code: 'COMMAND_FAILED',
    message: `'${[task.cmd, ...task.args].join(' ')}' ${how}${stderrTail === '' ? '' : `: ${stderrTail.slice(-2000)}`}`,
    output: run.stdout.text(),
    usage,
    detail: { exitCode: run.exitCode, signal: run.signal },
  };
}
