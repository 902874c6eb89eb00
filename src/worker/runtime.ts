/**
 * The worker runtime: what runs inside a worker process. It says `ready`,
 * then takes one `dispatch` at a time, heartbeats while it executes, streams
 * `progress`, and answers with exactly one `result`. Every message from the
 * host is validated; an invalid one is refused and reported on stderr.
 *
 * The worker leads its own process group, and every program it starts joins
 * that group. When the host goes away (the IPC channel closes — the host
 * exited or was killed) the worker kills its group, itself included, so no
 * execution outlives the host that owned it. Asked to stop (a `shutdown`
 * message or SIGTERM), it stops its execution — the program tree gets SIGTERM,
 * then SIGKILL after the grace — and exits only once that is done, still
 * watching the channel: a host that dies during the grace still takes the
 * whole group with it.
 */
import { IPC_VERSION, HostMessageSchema, type ExecutionResult, type HostMessage, type Task, type WorkerMessage } from '../protocol/ipc.js';
import type { ExecutorContext } from './executors/context.js';
import { ProgressBatcher } from './output-capture.js';
import { UsageTally } from './usage.js';

export interface WorkerRuntimeOptions {
  /** Time between SIGTERM and SIGKILL for programs the worker starts. @default 5000 */
  killGraceMs?: number;
  /** Output kept per stream of a program, in bytes. @default 1048576 */
  maxOutputBytes?: number;
}

interface Current {
  executionId: string;
  fence: number;
  controller: AbortController;
  settled: Promise<void>;
}

/** Run the worker loop on this process's IPC channel. */
export function startWorkerRuntime(options: WorkerRuntimeOptions = {}): void {
  const send = process.send?.bind(process);
  if (send === undefined) {
    process.stderr.write('runwarden worker: no IPC channel; workers are started by a runwarden host\n');
    process.exit(2);
  }
  const killGraceMs = options.killGraceMs ?? 5000;
  const maxOutputBytes = options.maxOutputBytes ?? 1_048_576;
  let current: Current | undefined;
  let stopping = false;

  const post = (message: WorkerMessage): void => {
    if (process.connected) send(message);
  };

  const killGroupAndExit = (): never => {
    try {
      process.kill(-process.pid, 'SIGKILL');
    } catch {
      // not a group leader: children were started in our group only if we lead it
    }
    process.exit(1);
  };
  process.on('disconnect', killGroupAndExit);

  process.on('message', (raw: unknown) => {
    const parsed = HostMessageSchema.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      process.stderr.write(`runwarden worker: IPC_INVALID message refused: ${issue?.path.join('.') ?? ''}: ${issue?.message ?? 'invalid'}\n`);
      return;
    }
    const message: HostMessage = parsed.data;
    switch (message.type) {
      case 'dispatch': {
        if (current !== undefined || stopping) {
          post({
            v: IPC_VERSION,
            type: 'result',
            executionId: message.executionId,
            fence: message.fence,
            result: { type: 'error', code: 'EXECUTOR_FAILED', message: `worker ${process.pid} is ${stopping ? 'stopping' : `busy with ${current!.executionId}`}` },
          });
          return;
        }
        const controller = new AbortController();
        const running: Current = { executionId: message.executionId, fence: message.fence, controller, settled: Promise.resolve() };
        running.settled = execute(message, running).finally(() => {
          if (current === running) current = undefined;
        });
        current = running;
        return;
      }
      case 'cancel':
        if (current?.executionId === message.executionId && current.fence === message.fence) current.controller.abort(message.reason);
        return;
      case 'shutdown':
        void stop(0);
        return;
    }
  });

  /** Stop the execution (its program tree is terminated with the grace), then exit. */
  async function stop(code: number): Promise<void> {
    if (stopping) return;
    stopping = true;
    const running = current;
    running?.controller.abort('shutdown');
    await running?.settled;
    process.off('disconnect', killGroupAndExit);
    process.exit(code);
  }
  process.on('SIGTERM', () => void stop(143));
  process.on('SIGINT', () => undefined); // a terminal's Ctrl-C is for the host, which stops us itself

  async function execute(message: Extract<HostMessage, { type: 'dispatch' }>, running: Current): Promise<void> {
    const ids = { executionId: message.executionId, fence: message.fence };
    const heartbeat = setInterval(() => post({ v: IPC_VERSION, type: 'heartbeat', ...ids }), message.heartbeatMs);
    post({ v: IPC_VERSION, type: 'heartbeat', ...ids });
    const batcher = new ProgressBatcher((stream, text) => post({ v: IPC_VERSION, type: 'progress', ...ids, stream, text: text.slice(-65_536) }));
    const tally = new UsageTally();
    const ctx: ExecutorContext = {
      signal: running.controller.signal,
      progress: (stream, text) => batcher.push(stream, text),
      killGraceMs,
      maxOutputBytes,
      commands: message.commands,
      programEnv: message.programEnv,
      reportUsage: (u) => {
        post({ v: IPC_VERSION, type: 'usage', ...ids, ...tally.add(u) });
      },
    };
    const cpuBefore = process.cpuUsage();
    let result: ExecutionResult;
    try {
      result = await runTask(message.task, ctx);
    } catch (err) {
      result = { type: 'error', code: 'EXECUTOR_FAILED', message: err instanceof Error ? err.message : String(err) };
    } finally {
      clearInterval(heartbeat);
      batcher.flush();
    }
    const cpu = process.cpuUsage(cpuBefore);
    const cpuMs = (cpu.user + cpu.system) / 1000;
    const usage = { ...tally.totals(), cpuMs: (result.usage?.cpuMs ?? 0) + cpuMs };
    post({ v: IPC_VERSION, type: 'result', ...ids, result: { ...result, usage } });
  }

  post({ v: IPC_VERSION, type: 'ready', pid: process.pid });
}

/**
 * Executors are loaded on first use: a worker that only runs scripts never
 * loads execa or simple-git, and every worker says `ready` sooner.
 */
async function runTask(task: Task, ctx: ExecutorContext): Promise<ExecutionResult> {
  switch (task.kind) {
    case 'command':
      return (await import('./executors/command.js')).executeCommand(task, ctx);
    case 'agent':
      return (await import('./executors/agent.js')).executeAgent(task, ctx);
    case 'verify':
      return (await import('./executors/verify.js')).executeVerify(task, ctx);
    case 'script':
      return (await import('./executors/script.js')).executeScript(task, {
        signal: ctx.signal,
        heartbeat: (progress) => {
          if (progress !== undefined) ctx.progress('log', `${progress}\n`);
        },
        reportUsage: (u) => ctx.reportUsage(u),
        log: (text) => ctx.progress('log', text),
      });
    case 'digest': {
      const { digest } = await (await import('./executors/digest.js')).workspaceDigest(task.cwd, task.scope, ctx.signal);
      return { type: 'ok', output: digest ?? '', digest, usage: { cpuMs: 0, tokensIn: 0, tokensOut: 0, costUsd: 0 } };
    }
  }
}
