/**
 * Runs in the background: `run` and `resume` without `--wait` hand the run to
 * a detached host process and return at once. The request — secrets included —
 * travels over the IPC channel, never through a file or the command line. The
 * background host answers once the run exists (or with the error), then keeps
 * driving it until it ends; its output goes to `<home>/logs/background.log`.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Host } from '../host/host.js';
import { RunwardenError, isRunwardenError, type ErrorCode } from '../protocol/errors.js';

export type BackgroundRequest =
  | { mode: 'start'; spec: unknown; specPath?: string; runId?: string; cwd: string }
  | { mode: 'resume'; runId: string; spec?: unknown; specPath?: string };

type BackgroundReply = { ok: true; runId: string; pid: number } | { ok: false; error: { code: ErrorCode; message: string; field?: string } };

const BIN = fileURLToPath(new URL('../../bin/runwarden.js', import.meta.url));

/**
 * Start a detached host for `request` and wait until it has the run.
 * @throws {RunwardenError} the background host's error (bad spec, existing id, …).
 */
export async function startInBackground(home: string, request: BackgroundRequest, timeoutMs = 60_000): Promise<{ runId: string; pid: number }> {
  mkdirSync(join(home, 'logs'), { recursive: true });
  const log = openSync(join(home, 'logs', 'background.log'), 'a');
  const child = spawn(process.execPath, [BIN, 'background-host'], {
    detached: true,
    stdio: ['ignore', log, log, 'ipc'],
    env: { ...process.env, RUNWARDEN_HOME: home },
  });
  child.unref();
  const reply = await new Promise<BackgroundReply>((resolve, reject) => {
    const timer = setTimeout(() => reject(new RunwardenError('WORKER_START_FAILED', `the background host (pid ${child.pid}) did not answer within ${timeoutMs} ms; see ${join(home, 'logs', 'background.log')}`)), timeoutMs);
    child.once('message', (m) => {
      clearTimeout(timer);
      resolve(m as BackgroundReply);
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new RunwardenError('WORKER_START_FAILED', `the background host exited with code ${code} before answering; see ${join(home, 'logs', 'background.log')}`));
    });
    child.send(request);
  });
  child.disconnect();
  if (!reply.ok) throw new RunwardenError(reply.error.code, reply.error.message, reply.error.field === undefined ? {} : { field: reply.error.field });
  return { runId: reply.runId, pid: reply.pid };
}

/** The background host's side (the hidden `background-host` command). */
export async function backgroundHostMain(): Promise<void> {
  const request = await new Promise<BackgroundRequest>((resolve) => process.once('message', (m) => resolve(m as BackgroundRequest)));
  const host = await Host.open();
  let handle;
  try {
    handle =
      request.mode === 'start'
        ? await host.start({ spec: request.spec, cwd: request.cwd, ...(request.specPath === undefined ? {} : { specPath: request.specPath }), ...(request.runId === undefined ? {} : { runId: request.runId }) })
        : await host.resume(request.runId, { ...(request.spec === undefined ? {} : { spec: request.spec }), ...(request.specPath === undefined ? {} : { specPath: request.specPath }) });
  } catch (err) {
    const error = isRunwardenError(err) ? err.toJSON() : { code: 'EXECUTOR_FAILED' as const, message: (err as Error).message };
    process.send?.({ ok: false, error } satisfies BackgroundReply);
    await host.close();
    process.exitCode = 2;
    return;
  }
  process.send?.({ ok: true, runId: handle.runId, pid: process.pid } satisfies BackgroundReply);
  if (process.connected) process.disconnect();
  const stop = (): void => void host.close();
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.on('SIGHUP', () => undefined);
  const result = await handle.done;
  process.stdout.write(`${new Date().toISOString()} run ${handle.runId} ${result.record.state} (${result.record.outcome})${result.stopped !== undefined ? ` stopped: ${result.stopped}` : ''}\n`);
  await host.close();
}
