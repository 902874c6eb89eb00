/** The `command` executor: run a program; its stdout is the node output. */
import type { ExecutionResult, TaskOf } from '../../protocol/ipc.js';
import type { ExecutorContext } from './context.js';
import { runProgram } from './program.js';

export async function executeCommand(task: TaskOf<'command'>, ctx: ExecutorContext): Promise<ExecutionResult> {
  return runProgram(
    {
      cmd: task.cmd,
      args: task.args,
      cwd: task.cwd,
      ...(task.env === undefined ? {} : { env: task.env }),
      label: `'${[task.cmd, ...task.args].join(' ')}'`,
      failCode: 'COMMAND_FAILED',
    },
    ctx,
  );
}
