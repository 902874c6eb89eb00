/** Helpers for tests that drive the real CLI in real processes. */
import { mkdtempSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa, type ResultPromise } from 'execa';
import { expect } from 'vitest';
import type { RunEvent } from '../../src/protocol/events.js';
import { replay, type RunRecord } from '../../src/protocol/record.js';
import { parseWorkflowSpec } from '../../src/protocol/spec.js';
import type { HostOptions } from '../../src/host/host-options.js';

export const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
export const BIN = join(ROOT, 'bin', 'runwarden.js');

/** Host settings that make loss detection fast enough for tests. */
export const FAST_CONFIG: HostOptions = {
  heartbeatMs: 100,
  heartbeatTimeoutMs: 1500,
  killGraceMs: 500,
  controlPollMs: 50,
  leaseRenewMs: 1000,
  workerIdleMs: 2000,
};

export function tempDir(prefix = 'rw-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** A fresh store home with `config.json`. */
export function makeHome(config: HostOptions = {}): string {
  const home = tempDir('rw-home-');
  writeFileSync(join(home, 'config.json'), JSON.stringify({ ...FAST_CONFIG, ...config }));
  return home;
}

export interface CliResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  env?: Record<string, string>;
  input?: string;
  cwd?: string;
  timeoutMs?: number;
}

/** Run the CLI to completion. */
export async function cli(home: string, args: string[], options: CliOptions = {}): Promise<CliResult> {
  const result = await execa(process.execPath, [BIN, ...args], {
    env: { RUNWARDEN_HOME: home, ...options.env },
    reject: false,
    ...(options.input === undefined ? {} : { input: options.input }),
    cwd: options.cwd ?? ROOT,
    timeout: options.timeoutMs ?? 60_000,
  });
  return { exitCode: result.exitCode ?? -1, stdout: String(result.stdout), stderr: String(result.stderr) };
}

/** Start the CLI without waiting for it. */
export function spawnCli(home: string, args: string[], options: CliOptions = {}): ResultPromise {
  return execa(process.execPath, [BIN, ...args], {
    env: { RUNWARDEN_HOME: home, ...options.env },
    reject: false,
    cwd: options.cwd ?? ROOT,
    timeout: options.timeoutMs ?? 60_000,
    ...(options.input === undefined ? {} : { input: options.input }),
  });
}

/** Poll until `fn` returns a truthy value. */
export async function waitFor<T>(fn: () => T | Promise<T>, what: string, timeoutMs = 20_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await fn();
      if (value) return value as NonNullable<T>;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export function runDir(home: string, runId: string): string {
  return join(home, 'runs', runId);
}

/** The events of a run, read straight from the file (whole lines only). */
export function readEvents(home: string, runId: string): RunEvent[] {
  let text: string;
  try {
    text = readFileSync(join(runDir(home, runId), 'events.jsonl'), 'utf8');
  } catch {
    return [];
  }
  const complete = text.slice(0, text.lastIndexOf('\n') + 1);
  return complete
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as RunEvent);
}

export function readCheckpoint(home: string, runId: string): RunRecord {
  return (JSON.parse(readFileSync(join(runDir(home, runId), 'run.json'), 'utf8')) as { record: RunRecord }).record;
}

/** Write a spec file in `dir` and return its path. */
export function writeSpec(dir: string, spec: unknown, name = 'spec.json'): string {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify(spec, null, 2));
  return path;
}

/** A command node that appends its id to `$MARK` (to count how often it ran), then optionally sleeps. */
export function markNode(id: string, mark: string, sleepS = 0, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { id, kind: 'command', cmd: 'sh', args: ['-c', `echo ${id} >> "$MARK"${sleepS > 0 ? `; sleep ${sleepS}` : ''}`], env: { MARK: mark }, ...extra };
}

/** How many times each node id appears in a mark file. */
export function marks(path: string): Record<string, number> {
  let text = '';
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return {};
  }
  const counts: Record<string, number> = {};
  for (const id of text.split('\n').filter((l) => l !== '')) counts[id] = (counts[id] ?? 0) + 1;
  return counts;
}

/**
 * The durable-history assertions every crash test makes: seq runs 1..n with no
 * gap or duplicate, no attempt ends twice, and run.json equals the replay of
 * events.jsonl against spec.json.
 */
export function assertConsistent(home: string, runId: string): RunEvent[] {
  const events = readEvents(home, runId);
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
  const ended = new Set<string>();
  for (const e of events) {
    if (e.type === 'node_succeeded' || e.type === 'node_failed' || e.type === 'node_requeued' || e.type === 'node_interrupted') {
      const key = `${e.node}/a${e.attempt}`;
      expect(ended.has(key), `attempt ${key} ended twice`).toBe(false);
      ended.add(key);
    }
  }
  const spec = parseWorkflowSpec(JSON.parse(readFileSync(join(runDir(home, runId), 'spec.json'), 'utf8')));
  expect(readCheckpoint(home, runId)).toEqual(replay(spec, events));
  return events;
}

export function lastState(events: RunEvent[]): { state?: string; outcome?: string } {
  const states = events.filter((e) => e.type === 'run_state');
  const last = states.at(-1);
  return last?.type === 'run_state' ? { state: last.state, ...(last.outcome === undefined ? {} : { outcome: last.outcome }) } : {};
}
