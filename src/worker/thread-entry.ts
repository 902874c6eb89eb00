/**
 * The worker-thread entry (run by piscina): one `script` execution per call.
 * The execution talks to the host over its own MessagePort — heartbeats every
 * `heartbeatMs`, progress, usage — and listens there for `cancel`. Past the
 * host's grace, a script that ignores its signal is terminated with its thread.
 */
import type { MessagePort } from 'node:worker_threads';
import { IPC_VERSION, type ExecutionResult, type TaskOf, type ThreadMessage } from '../protocol/ipc.js';
import { executeScript } from './executors/script.js';
import { ProgressBatcher } from './output-capture.js';
import { usageReport } from './usage.js';

export interface ThreadCall {
  executionId: string;
  fence: number;
  heartbeatMs: number;
  task: TaskOf<'script'>;
  port: MessagePort;
}

export default async function runInThread(call: ThreadCall): Promise<ExecutionResult> {
  const { port } = call;
  const ids = { executionId: call.executionId, fence: call.fence };
  const post = (message: ThreadMessage): void => port.postMessage(message);
  const controller = new AbortController();
  port.on('message', (m: { type?: string; reason?: string }) => {
    if (m?.type === 'cancel') controller.abort(m.reason ?? 'cancelled');
  });
  const heartbeat = setInterval(() => post({ v: IPC_VERSION, type: 'heartbeat', ...ids }), call.heartbeatMs);
  post({ v: IPC_VERSION, type: 'heartbeat', ...ids });
  const batcher = new ProgressBatcher((stream, text) => post({ v: IPC_VERSION, type: 'progress', ...ids, stream, text: text.slice(-65_536) }));
  const tally = { tokensIn: 0, tokensOut: 0, costUsd: 0 };
  try {
    const result = await executeScript(call.task, {
      signal: controller.signal,
      heartbeat: (progress) => {
        if (progress !== undefined) batcher.push('log', `${progress}\n`);
      },
      reportUsage: (u) => {
        const report = usageReport(u);
        tally.tokensIn += report.tokensIn;
        tally.tokensOut += report.tokensOut;
        tally.costUsd += report.costUsd;
        post({ v: IPC_VERSION, type: 'usage', ...ids, ...report });
      },
      log: (text) => batcher.push('log', text),
    });
    return { ...result, usage: { ...tally, cpuMs: 0 } };
  } finally {
    clearInterval(heartbeat);
    batcher.flush();
    port.close();
  }
}
