/** What every executor receives besides its task. */
export interface ExecutorContext {
  /** Aborted when the host cancels the execution (cancel, timeout, shutdown). */
  signal: AbortSignal;
  /** Forward output to the host as `progress` messages (batched). */
  progress(stream: 'stdout' | 'stderr' | 'log', text: string): void;
  /** Time between SIGTERM and SIGKILL for programs the executor starts. */
  killGraceMs: number;
  /** How much output to keep per stream, in bytes. */
  maxOutputBytes: number;
  /** The programs the task may start: `*`, or their real paths. */
  commands: readonly string[];
  /** Variables every program gets and the worker itself does not (NODE_OPTIONS and the like). */
  programEnv: Record<string, string>;
  /** Report usage (tokens, cost) while executing. */
  reportUsage(usage: { tokensIn?: number; tokensOut?: number; costUsd?: number; model?: string }): void;
}
