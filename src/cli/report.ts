/**
 * Following a run in the foreground: print every event as it is committed,
 * stop cleanly on Ctrl-C (the in-flight attempt is marked interrupted, the
 * lease released, nothing lost; a second Ctrl-C exits at once), and turn the
 * end state into an exit code.
 */
import type { Host, RunHandle } from '../host/host.js';
import { isRunwardenError } from '../protocol/errors.js';
import { TERMINAL_STATES } from '../protocol/events.js';
import type { RunEvent } from '../protocol/events.js';
import type { RunRecord } from '../protocol/record.js';
import { join } from 'node:path';
import type { Client } from './client.js';
import { err, out } from './io.js';
import { formatEvent } from './render.js';

/** Exit codes: 0 completed (verified or unverified), 1 failed / refuted / cancelled / stopped early, 2 bad input, 128 + signal when stopped by SIGINT (130) or SIGTERM (143). */
export const EXIT = { ok: 0, failed: 1, usage: 2, interrupted: 130, terminated: 143 } as const;

export function exitCodeFor(record: RunRecord): number {
  return record.state === 'completed' ? EXIT.ok : EXIT.failed;
}

export interface FollowOptions {
  json: boolean;
  out: (line: string) => void;
  err: (line: string) => void;
}

/** Print the run's events until the driver stops; returns the final record and whether Ctrl-C stopped it. */
export async function followRun(
  host: Host,
  handle: RunHandle,
  options: FollowOptions,
): Promise<{ record: RunRecord; interrupted: NodeJS.Signals | undefined; stopped?: string; error?: Error }> {
  let lastSeq = 0;
  const print = (event: RunEvent): void => {
    if (event.seq <= lastSeq) return;
    lastSeq = event.seq;
    if (options.json) options.out(JSON.stringify(event));
    else {
      const line = formatEvent(event);
      if (line !== undefined) options.out(line);
    }
  };
  const buffered: RunEvent[] = [];
  let replaying = true;
  const unlisten = handle.listen({
    event: (event) => {
      if (replaying) buffered.push(event);
      else print(event);
    },
  });
  for (const event of await host.store.readEvents(handle.runId)) print(event);
  for (const event of buffered) print(event);
  replaying = false;

  let interrupted: NodeJS.Signals | undefined;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (interrupted !== undefined) {
      options.err('second interrupt: exiting now');
      process.exit(signal === 'SIGTERM' ? EXIT.terminated : EXIT.interrupted);
    }
    interrupted = signal;
    options.err(`interrupting: stopping the in-flight attempt; resume later with: runwarden resume ${handle.runId}  (Ctrl-C again to exit at once)`);
    void host.close();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    const result = await handle.done;
    return { record: result.record, interrupted, ...(result.stopped === undefined ? {} : { stopped: result.stopped }), ...(result.error === undefined ? {} : { error: result.error }) };
  } finally {
    unlisten();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

/** Wait for a run in the foreground and report it. Returns the exit code. */
export async function waitAndReport(host: Host, handle: Awaited<ReturnType<Host['start']>>, json: boolean): Promise<number> {
  const { record, interrupted, stopped, error } = await followRun(host, handle, { json, out, err });
  if (error !== undefined) err(`error${isRunwardenError(error) ? ` [${error.code}]` : ''}: ${error.message}`);
  if (!json) summarize(host, record, stopped);
  if (interrupted !== undefined && !TERMINAL_STATES.has(record.state)) return interrupted === 'SIGTERM' ? EXIT.terminated : EXIT.interrupted;
  if (stopped !== undefined && !TERMINAL_STATES.has(record.state)) return EXIT.failed;
  return exitCodeFor(record);
}

function summarize(host: Host, record: RunRecord, stopped: string | undefined): void {
  summary(record, host.store.locate(record.runId));
  if (!TERMINAL_STATES.has(record.state)) out(`the run is not finished (${stopped ?? 'stopped'}); continue it with: runwarden resume ${record.runId}`);
}

function summary(record: RunRecord, location: string | null | undefined): void {
  out('');
  out(`run ${record.runId} ${record.state} · ${record.outcome}${record.outcomeReason !== undefined ? ` (${record.outcomeReason})` : ''}`);
  if (record.error !== undefined) out(`error: ${record.error.code}: ${record.error.message}`);
  if (record.lastVerdict?.evidenceId !== undefined && location != null) out(`evidence: ${join(location, 'evidence', record.lastVerdict.evidenceId)}`);
}

/**
 * Follow a run the daemon drives: print its events until it ends, then the
 * summary. Ctrl-C stops following only — the run goes on in the daemon.
 * Returns the exit code.
 */
export async function followRemote(client: Client, runId: string, json: boolean): Promise<number> {
  const abort = new AbortController();
  let interrupted: NodeJS.Signals | undefined;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (interrupted !== undefined) process.exit(signal === 'SIGTERM' ? EXIT.terminated : EXIT.interrupted);
    interrupted = signal;
    abort.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    for await (const event of client.events(runId, { follow: true, signal: abort.signal })) {
      if (json) out(JSON.stringify(event));
      else {
        const line = formatEvent(event);
        if (line !== undefined) out(line);
      }
    }
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  if (interrupted !== undefined) {
    err(`stopped following; run ${runId} goes on in the daemon. Follow it again with: runwarden events ${runId} --follow  (or stop it: runwarden cancel ${runId})`);
    return interrupted === 'SIGTERM' ? EXIT.terminated : EXIT.interrupted;
  }
  const { record, location } = await client.show(runId);
  if (!json) summary(record, location);
  return TERMINAL_STATES.has(record.state) ? exitCodeFor(record) : EXIT.failed;
}

