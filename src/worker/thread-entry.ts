/**
 * The worker-thread entry (run by piscina): one `script` execution per call.
 * A thread reports heartbeats, progress and usage to the host over its parent
 * port (piscina hands them to the pool as `message` events), and hears
 * `cancel` on the pool's broadcast channel — no channel is set up per
 * execution. Past the host's grace, a script that ignores its signal is
 * terminated with its thread.
 */
import { BroadcastChannel, parentPort, workerData } from 'node:worker_threads';
import { IPC_VERSION, THREAD_MESSAGE, type ExecutionResult, type TaskOf, type ThreadMessage } from '../protocol/ipc.js';
import { executeScript } from './executors/script.js';
import { ProgressBatcher } from './output-capture.js';
import { UsageTally } from './usage.js';

export interface ThreadCall {
  executionId: string;
  fence: number;
  heartbeatMs: number;
  task: TaskOf<'script'>;
}

/** The data a pool starts its threads with. */
export interface ThreadData {
  /** Name of the pool's BroadcastChannel carrying `{ executionId, reason }` cancels. */
  cancelChannel: string;
}

const running = new Map<string, AbortController>();
const cancels = new BroadcastChannel((workerData as ThreadData).cancelChannel);
cancels.onmessage = (event: unknown) => {
  const { executionId, reason } = (event as { data: { executionId: string; reason: string } }).data;
  running.get(executionId)?.abort(reason);
};
// The channel must not keep an idle thread alive.
(cancels as unknown as { unref(): void }).unref();

function post(message: ThreadMessage): void {
  parentPort?.postMessage({ [THREAD_MESSAGE]: true, ...message });
}

export default async function runInThread(call: ThreadCall): Promise<ExecutionResult> {
  const ids = { executionId: call.executionId, fence: call.fence };
  const controller = new AbortController();
  running.set(call.executionId, controller);
  const heartbeat = setInterval(() => post({ v: IPC_VERSION, type: 'heartbeat', ...ids }), call.heartbeatMs);
  const batcher = new ProgressBatcher((stream, text) => post({ v: IPC_VERSION, type: 'progress', ...ids, stream, text: text.slice(-65_536) }));
  const tally = new UsageTally();
  try {
    const result = await executeScript(call.task, {
      signal: controller.signal,
      heartbeat: (progress) => {
        if (progress !== undefined) batcher.push('log', `${progress}\n`);
      },
      reportUsage: (u) => {
        post({ v: IPC_VERSION, type: 'usage', ...ids, ...tally.add(u) });
      },
      log: (text) => batcher.push('log', text),
    });
    return { ...result, usage: { ...tally.totals(), cpuMs: 0 } };
  } finally {
    clearInterval(heartbeat);
    batcher.flush();
    running.delete(call.executionId);
  }
}
