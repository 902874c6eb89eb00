/**
 * One worker child process, as the host sees it: the handle, its lifecycle,
 * and the validated stream of its messages.
 *
 * Lifecycle (`state`):
 * - `starting`: forked, waiting for `ready`.
 * - `idle`: ready, holding no execution.
 * - `busy`: holding one execution.
 * - `retiring`: being stopped (shutdown, or killed after a lost claim).
 * - `exited`: gone; `exited` has resolved.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { IPC_VERSION, WorkerMessageSchema, type HostMessage, type WorkerMessage } from '../../protocol/ipc.js';
import { terminateTree } from '../../util/process-tree.js';

export type WorkerState = 'starting' | 'idle' | 'busy' | 'retiring' | 'exited';

export interface WorkerExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** The last lines the worker wrote to stderr. */
  stderrTail: string;
}

export interface WorkerProcessOptions {
  entry: string;
  env: NodeJS.ProcessEnv;
  execArgv?: string[];
  onMessage(worker: WorkerProcess, message: WorkerMessage): void;
  onInvalidMessage(worker: WorkerProcess, detail: string): void;
  onExit(worker: WorkerProcess, exit: WorkerExit): void;
}

let nextWorkerId = 1;

export class WorkerProcess {
  readonly id = nextWorkerId++;
  readonly child: ChildProcess;
  readonly pid: number;
  state: WorkerState = 'starting';
  /** Executions this worker has run. */
  executions = 0;
  idleTimer: NodeJS.Timeout | undefined;
  readonly exited: Promise<WorkerExit>;
  readonly ready: Promise<void>;
  #stderr = '';
  #stopping: Promise<void> | undefined;

  constructor(options: WorkerProcessOptions) {
    // The worker leads its own process group (detached) so that it and every
    // program it starts can be signalled as one, and so that a Ctrl-C meant for
    // the host does not reach executions directly: the host stops them itself.
    this.child = fork(options.entry, [], {
      detached: true,
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
      serialization: 'json',
      env: options.env,
      execArgv: options.execArgv ?? [],
    });
    if (this.child.pid === undefined) throw new Error(`cannot fork worker ${options.entry}`);
    this.pid = this.child.pid;
    this.child.stderr?.on('data', (chunk: Buffer) => {
      this.#stderr = (this.#stderr + chunk.toString('utf8')).slice(-8192);
    });
    let markReady: () => void;
    let failReady: (err: Error) => void;
    this.ready = new Promise<void>((resolve, reject) => {
      markReady = resolve;
      failReady = reject;
    });
    this.ready.catch(() => undefined);
    this.exited = new Promise<WorkerExit>((resolve) => {
      this.child.once('exit', (code, signal) => {
        this.state = 'exited';
        if (this.idleTimer !== undefined) clearTimeout(this.idleTimer);
        // Let the stderr pipe drain so the tail holds the worker's last words.
        setImmediate(() => {
          const exit = { code, signal, stderrTail: this.#stderr.trim().split('\n').slice(-20).join('\n') };
          failReady(new Error(`worker ${this.pid} exited before it was ready (code ${code}, signal ${signal})${exit.stderrTail ? `: ${exit.stderrTail}` : ''}`));
          options.onExit(this, exit);
          resolve(exit);
        });
      });
    });
    this.child.on('error', () => undefined); // surfaced through 'exit'
    this.child.on('message', (raw: unknown) => {
      const parsed = WorkerMessageSchema.safeParse(raw);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        options.onInvalidMessage(this, `${issue?.path.join('.') ?? ''}: ${issue?.message ?? 'invalid'}`);
        return;
      }
      if (parsed.data.type === 'ready') {
        if (this.state === 'starting') this.state = 'idle';
        markReady();
        return;
      }
      options.onMessage(this, parsed.data);
    });
  }

  /** Send a message; false when the channel is closed. */
  send(message: HostMessage): boolean {
    if (!this.child.connected) return false;
    try {
      this.child.send(message);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Stop the worker and everything it started, and wait until all of it is gone:
   * optionally ask it to shut down, then SIGTERM its group and tree, then SIGKILL
   * after `graceMs` (at once when `graceMs` is 0). Idempotent.
   */
  stop(options: { notify: boolean; graceMs: number }): Promise<void> {
    this.#stopping ??= (async () => {
      this.state = 'retiring';
      if (options.notify) this.send({ v: IPC_VERSION, type: 'shutdown' });
      await terminateTree(this.pid, { group: true, graceMs: options.graceMs, immediate: options.graceMs === 0 });
      await this.exited;
    })();
    return this.#stopping;
  }
}
