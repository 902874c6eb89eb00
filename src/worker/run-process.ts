/**
 * Run one program inside a worker: argv only (never a shell string), output
 * captured with a bounded tail, and a timeout or cancellation that terminates
 * the program's whole process tree, not just the program.
 */
import { execa } from 'execa';
import { terminateTree } from '../util/process-tree.js';
import { OutputCapture } from './output-capture.js';

export interface RunProcessOptions {
  cwd: string;
  /** Variables added to the worker's environment. */
  env?: Record<string, string>;
  /** Text written to the program's stdin (then closed); stdin is empty otherwise. */
  input?: string;
  signal: AbortSignal;
  /** Kill the tree after this long. */
  timeoutMs?: number;
  /** Time between SIGTERM and SIGKILL. */
  killGraceMs: number;
  /** How much of each stream to keep, in bytes. */
  maxOutputBytes: number;
  onStdout?: (text: string) => void;
  onStderr?: (text: string) => void;
}

export interface ProcessOutcome {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  cancelled: boolean;
  /** Set when the program could not be started (`ENOENT`, `EACCES`). */
  spawnError?: { code: string; message: string };
  stdout: OutputCapture;
  stderr: OutputCapture;
  /** stdout and stderr interleaved, as a terminal would show them. */
  all: OutputCapture;
  durationMs: number;
}

export async function runProcess(cmd: string, args: readonly string[], options: RunProcessOptions): Promise<ProcessOutcome> {
  const started = performance.now();
  const stdout = new OutputCapture(options.maxOutputBytes);
  const stderr = new OutputCapture(options.maxOutputBytes);
  const all = new OutputCapture(options.maxOutputBytes);
  const child = execa(cmd, args, {
    cwd: options.cwd,
    env: options.env ?? {},
    extendEnv: true,
    reject: false,
    buffer: false,
    stripFinalNewline: false,
    ...(options.input === undefined ? { stdin: 'ignore' as const } : { input: options.input }),
  });
  child.stdout?.on('data', (chunk: Buffer) => {
    stdout.push(chunk);
    all.push(chunk);
    options.onStdout?.(chunk.toString('utf8'));
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr.push(chunk);
    all.push(chunk);
    options.onStderr?.(chunk.toString('utf8'));
  });
  let timedOut = false;
  let cancelled = false;
  let terminating: Promise<boolean> | undefined;
  const terminate = (): void => {
    if (child.pid !== undefined) terminating ??= terminateTree(child.pid, { graceMs: options.killGraceMs });
  };
  const timer = options.timeoutMs === undefined ? undefined : setTimeout(() => {
    timedOut = true;
    terminate();
  }, options.timeoutMs);
  const onAbort = (): void => {
    cancelled = true;
    terminate();
  };
  if (options.signal.aborted) onAbort();
  else options.signal.addEventListener('abort', onAbort, { once: true });
  try {
    const result = await child;
    await terminating;
    const outcome: ProcessOutcome = {
      exitCode: result.exitCode ?? null,
      signal: result.signal ?? null,
      timedOut,
      cancelled,
      stdout,
      stderr,
      all,
      durationMs: performance.now() - started,
    };
    if (result.failed && result.exitCode === undefined && result.signal === undefined && typeof result.code === 'string') {
      outcome.spawnError = { code: result.code, message: result.shortMessage ?? result.code };
    }
    return outcome;
  } finally {
    if (timer !== undefined) clearTimeout(timer);
    options.signal.removeEventListener('abort', onAbort);
  }
}
