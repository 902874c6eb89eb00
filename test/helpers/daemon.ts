/** Helpers for tests that start real daemons (`runwarden serve`) and talk HTTP to them. */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { execa, type ResultPromise } from 'execa';
import { BIN, ROOT, waitFor } from './cli.js';

export interface TestDaemon {
  proc: ResultPromise;
  pid: number;
  url: string;
  token: string;
  /** fetch with the bearer token; JSON in and out. */
  api<T = unknown>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }>;
  /** SIGTERM, then wait for the exit; returns the exit code. */
  stop(): Promise<number | undefined>;
  kill(): Promise<void>;
}

/** Start `runwarden serve --port 0` on `home` and wait until it has published its daemon file. */
export async function startDaemon(home: string, env: Record<string, string> = {}): Promise<TestDaemon> {
  const proc = execa(process.execPath, [BIN, 'serve', '--port', '0'], { env: { RUNWARDEN_HOME: home, ...env }, reject: false, cwd: ROOT, timeout: 300_000 });
  const pid = proc.pid!;
  let exited = false;
  void proc.then(() => {
    exited = true;
  });
  const file = await waitFor(() => {
    if (exited) throw new Error(`the daemon exited early`);
    try {
      return JSON.parse(readFileSync(join(home, 'daemons', `${pid}.json`), 'utf8')) as { url: string };
    } catch {
      return undefined;
    }
  }, `daemon ${pid} to listen`).catch(async (err: unknown) => {
    const r = await proc;
    throw new Error(`${(err as Error).message}\n${String(r.stderr)}`);
  });
  const token = readFileSync(join(home, 'daemon.token'), 'utf8').trim();
  const api = async <T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> => {
    const response = await fetch(`${file.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, body: (text === '' ? undefined : JSON.parse(text)) as T };
  };
  return {
    proc,
    pid,
    url: file.url,
    token,
    api,
    async stop() {
      proc.kill('SIGTERM');
      return (await proc).exitCode;
    },
    async kill() {
      proc.kill('SIGKILL');
      await proc;
    },
  };
}

/** Pids of the daemon files present in a store. */
export function daemonFiles(home: string): number[] {
  try {
    return readdirSync(join(home, 'daemons')).map((n) => Number.parseInt(n, 10));
  } catch {
    return [];
  }
}
