/** The `agent` executor: one turn through an engine. Only `custom` exists in this version. */
import type { ExecutionResult, TaskOf } from '../../protocol/ipc.js';
import { runCustomEngine } from '../engines/custom.js';
import type { ExecutorContext } from './context.js';

export async function executeAgent(task: TaskOf<'agent'>, ctx: ExecutorContext): Promise<ExecutionResult> {
  if (task.engine === 'custom') return runCustomEngine(task, ctx);
  return {
    type: 'error',
    code: 'ENGINE_UNSUPPORTED',
    message: `engine '${task.engine}' is not available in this version; use engine 'custom' with a customEngine {bin, args}`,
  };
}
