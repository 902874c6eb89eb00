/**
 * Delivery: turning committed run events into obligations, and sending them.
 *
 * The kernel hands every batch to {@link Deliverer.intend} before committing it
 * (write-ahead, see `outbox.ts`). The send loop claims due obligations,
 * checks that the event really is in the run's log (a crash before the commit
 * leaves an obligation for an event that never happened: it is dropped), sends
 * it to its sink, and settles it: acknowledged (2xx, exit 0, appended), retried
 * with exponential backoff and jitter, or — after `maxAttempts` — a dead letter
 * with the last error.
 */
import { createHmac } from 'node:crypto';
import { appendFile, mkdir } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { execa } from 'execa';
import type { Logger } from 'pino';
import { isRunwardenError } from '../../protocol/errors.js';
import { TERMINAL_STATES, type RunEvent } from '../../protocol/events.js';
import type { RunRecord } from '../../protocol/record.js';
import type { OwnerInfo, RunStore } from '../../store/run-store.js';
import type { DeliveryKind, DeliveryOptions, Sink } from './config.js';
import { deliveryId, Outbox, type Obligation } from './outbox.js';

/** What a sink receives: the body of the webhook POST, the command's stdin, the file's line. */
export interface DeliveryPayload {
  deliveryId: string;
  kind: DeliveryKind;
  runId: string;
  /** The run event, exactly as committed. */
  event: RunEvent;
  run: { name: string; state: string; outcome: string; error?: { code: string; message: string } };
  sink: string;
  /** 1 for the first attempt. */
  attempt: number;
}

/** The header carrying `sha256=<hex HMAC-SHA256 of the raw body>` (the GitHub webhook convention). */
export const SIGNATURE_HEADER = 'x-runwarden-signature';
/** The header carrying the delivery id, stable across retries: receivers drop duplicates by it. */
export const DELIVERY_HEADER = 'x-runwarden-delivery';
export const KIND_HEADER = 'x-runwarden-event';

/** `sha256=<hex>`: the signature of `body` under `secret`. */
export function signBody(secret: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

/** The delivery kinds a batch of committed events gives rise to, by event. */
export function deliverableKinds(events: readonly RunEvent[]): Array<{ event: RunEvent; kind: DeliveryKind }> {
  const found: Array<{ event: RunEvent; kind: DeliveryKind }> = [];
  const nodeBreach = events.some((e) => e.type === 'node_failed' && e.error.code === 'BUDGET_EXCEEDED');
  for (const event of events) {
    if (event.type === 'node_failed' && event.error.code === 'BUDGET_EXCEEDED') found.push({ event, kind: 'budget.breached' });
    if (event.type !== 'run_state') continue;
    // A run-level budget spent before a node started has no node_failed of its own.
    if (event.state === 'failed' && event.error?.code === 'BUDGET_EXCEEDED' && !nodeBreach) found.push({ event, kind: 'budget.breached' });
    if (TERMINAL_STATES.has(event.state)) found.push({ event, kind: 'run.ended' });
    else if (event.state === 'awaiting_human') found.push({ event, kind: 'run.parked' });
  }
  return found;
}

/**
 * The delay before attempt `attempts + 1`: exponential (base × 2^(attempts−1),
 * capped) with "equal jitter" — half fixed, half random — after the AWS
 * Architecture Blog's "Exponential Backoff And Jitter" (2015), so retries from
 * many obligations spread out but never come back at once.
 */
export function backoffMs(attempts: number, baseMs: number, maxMs: number, random = Math.random): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempts - 1));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

export interface DelivererOptions {
  home: string;
  store: RunStore;
  owner: OwnerInfo;
  options: DeliveryOptions;
  logger: Logger;
  /** Counts outcomes, for metrics. */
  onSettled?: (outcome: 'delivered' | 'retry' | 'dead' | 'dropped', sink: string) => void;
}

export class Deliverer {
  readonly outbox: Outbox;
  readonly #o: DelivererOptions;
  readonly #sinks: Map<string, Sink>;
  #timer: NodeJS.Timeout | undefined;
  #busy: Promise<void> | undefined;
  #sweeps = 0;
  #stopped = false;
  #again = false;
  readonly #abort = new AbortController();

  constructor(options: DelivererOptions) {
    this.#o = options;
    this.outbox = new Outbox(options.home);
    this.#sinks = new Map(options.options.sinks.map((s) => [s.name, s]));
  }

  /** Whether any sink is configured. */
  get active(): boolean {
    return this.#sinks.size > 0;
  }

  /**
   * Record the obligations a batch gives rise to, before it is committed.
   * @param events the batch, with seq assigned
   */
  async intend(record: RunRecord, events: readonly RunEvent[]): Promise<void> {
    if (!this.active) return;
    const now = new Date().toISOString();
    const obligations: Obligation[] = [];
    for (const { event, kind } of deliverableKinds(events)) {
      for (const sink of this.#sinks.values()) {
        if (sink.events !== undefined && !sink.events.includes(kind)) continue;
        obligations.push({ v: 1, id: deliveryId(record.runId, record.incarnationId, event.seq, sink.name), sink: sink.name, kind, runId: record.runId, incarnationId: record.incarnationId, seq: event.seq, eventType: event.type, createdAt: now, attempts: 0, nextAt: now });
      }
    }
    await this.outbox.intend(obligations);
  }

  /** Start the send loop (idempotent). */
  start(): void {
    if (this.#timer !== undefined || this.#stopped) return;
    for (const sink of this.#sinks.values()) {
      if (sink.type === 'webhook' && sink.secretEnv !== undefined && process.env[sink.secretEnv] === undefined) {
        this.#o.logger.warn({ sink: sink.name, secretEnv: sink.secretEnv }, `webhook sink ${sink.name}: the environment variable ${sink.secretEnv} is not set in this process; its deliveries fail until a host started with it sends them`);
      }
    }
    this.#timer = setInterval(() => this.kick(), this.#o.options.pollMs);
    this.#timer.unref();
    this.kick();
  }

  /** Look for due obligations now. */
  kick(): void {
    if (this.#timer === undefined || this.#stopped) return;
    if (this.#busy !== undefined) {
      this.#again = true;
      return;
    }
    this.#busy = this.#pass()
      .catch((err: unknown) => this.#o.logger.warn({ err: (err as Error).message }, 'delivery pass failed'))
      .finally(() => {
        this.#busy = undefined;
      });
  }

  /**
   * Stop sending. The pass under way may finish for up to `graceMs`; then an
   * attempt still in flight is abandoned, not counted, and its obligation stays
   * pending for the next host.
   */
  async stop(graceMs = 2000): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    const busy = this.#busy;
    if (busy !== undefined) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([busy, new Promise((r) => (timer = setTimeout(r, graceMs)))]);
      clearTimeout(timer);
    }
    this.#stopped = true;
    this.#abort.abort();
    await this.#busy;
  }

  async #pass(): Promise<void> {
    do {
      this.#again = false;
      await this.#passOnce();
    } while (this.#again && !this.#stopped);
  }

  async #passOnce(): Promise<void> {
    if (this.#sweeps++ % 20 === 0) {
      const reclaimed = await this.outbox.reclaimOrphans();
      if (reclaimed > 0) this.#o.logger.info({ reclaimed }, 'deliveries left in flight by a dead host returned to pending');
    }
    const now = Date.now();
    const due = (await this.outbox.list('pending')).filter((o) => Date.parse(o.nextAt) <= now);
    for (const o of due) {
      if (this.#stopped) return;
      const claimed = await this.outbox.claim(o, this.#o.owner);
      if (claimed !== undefined) await this.#attempt(claimed);
    }
  }

  async #attempt(o: Obligation): Promise<void> {
    const sink = this.#sinks.get(o.sink);
    const event = await this.#committedEvent(o);
    if (event === 'wait') {
      await this.outbox.settle({ ...o, nextAt: new Date(Date.now() + this.#o.options.pollMs * 4).toISOString() }, 'pending');
      return;
    }
    if (event === 'gone') {
      this.#o.logger.info({ deliveryId: o.id }, 'delivery dropped: its event was never committed, or the run is gone');
      await this.outbox.done(o);
      this.#o.onSettled?.('dropped', o.sink);
      return;
    }
    const attempt = o.attempts + 1;
    let error: string | undefined;
    if (sink === undefined) error = `no sink named ${o.sink} is configured (see delivery.sinks in config.json)`;
    else {
      const run = await this.#o.store.load(o.runId).catch(() => undefined);
      const record = run?.record;
      const payload: DeliveryPayload = {
        deliveryId: o.id,
        kind: o.kind,
        runId: o.runId,
        event,
        run: { name: record?.name ?? '', state: record?.state ?? 'unknown', outcome: record?.outcome ?? 'unverified', ...(record?.error === undefined ? {} : { error: { code: record.error.code, message: record.error.message } }) },
        sink: o.sink,
        attempt,
      };
      error = await this.#send(sink, payload);
    }
    const at = new Date().toISOString();
    if (error === undefined) {
      await this.outbox.done(o);
      this.#o.logger.info({ deliveryId: o.id, sink: o.sink, attempt }, 'delivered');
      this.#o.onSettled?.('delivered', o.sink);
      return;
    }
    if (this.#stopped && this.#abort.signal.aborted) {
      // Abandoned by a shutdown: not the receiver's failure, not an attempt.
      await this.outbox.settle(o, 'pending');
      return;
    }
    if (attempt >= this.#o.options.maxAttempts) {
      await this.outbox.settle({ ...o, attempts: attempt, lastError: error, lastAttemptAt: at, deadAt: at }, 'dead');
      this.#o.logger.warn({ deliveryId: o.id, sink: o.sink, attempts: attempt, err: error }, 'delivery gave up: dead letter');
      this.#o.onSettled?.('dead', o.sink);
      return;
    }
    const delay = backoffMs(attempt, this.#o.options.backoffMs, this.#o.options.maxBackoffMs);
    await this.outbox.settle({ ...o, attempts: attempt, lastError: error, lastAttemptAt: at, nextAt: new Date(Date.now() + delay).toISOString() }, 'pending');
    this.#o.logger.info({ deliveryId: o.id, sink: o.sink, attempt, retryInMs: delay, err: error }, 'delivery failed; will retry');
    this.#o.onSettled?.('retry', o.sink);
  }

  /** The committed event an obligation reports; `wait` while it may still land, `gone` when it never will. */
  async #committedEvent(o: Obligation): Promise<RunEvent | 'wait' | 'gone'> {
    let run;
    try {
      run = await this.#o.store.load(o.runId);
    } catch (err) {
      if (isRunwardenError(err) && err.code === 'STORE_CORRUPT') return 'gone';
      return 'wait';
    }
    if (run === undefined || run.record.incarnationId !== o.incarnationId) return 'gone';
    if (run.record.seq < o.seq) {
      // Not (yet) committed: it may still land while someone drives the run, or after it is resumed.
      return TERMINAL_STATES.has(run.record.state) ? 'gone' : 'wait';
    }
    const [event] = await this.#o.store.readEvents(o.runId, o.seq - 1);
    if (event === undefined || event.seq !== o.seq || event.type !== o.eventType) return 'gone';
    return deliverableKinds([event]).some((d) => d.kind === o.kind) ? event : 'gone';
  }

  /** One attempt; undefined on acknowledgement, else the error. */
  async #send(sink: Sink, payload: DeliveryPayload): Promise<string | undefined> {
    const body = JSON.stringify(payload);
    const timeoutMs = ('timeoutMs' in sink ? sink.timeoutMs : undefined) ?? this.#o.options.timeoutMs;
    try {
      switch (sink.type) {
        case 'webhook': {
          const headers: Record<string, string> = { 'content-type': 'application/json', [DELIVERY_HEADER]: payload.deliveryId, [KIND_HEADER]: payload.kind, 'user-agent': 'runwarden-delivery' };
          const secret = sink.secret ?? (sink.secretEnv === undefined ? undefined : process.env[sink.secretEnv]);
          if (sink.secretEnv !== undefined && secret === undefined) return `the environment variable ${sink.secretEnv} (the webhook secret) is not set`;
          if (secret !== undefined) headers[SIGNATURE_HEADER] = signBody(secret, body);
          const response = await fetch(sink.url, { method: 'POST', body, headers, signal: AbortSignal.any([AbortSignal.timeout(timeoutMs), this.#abort.signal]), redirect: 'manual' });
          await response.body?.cancel().catch(() => undefined);
          return response.status >= 200 && response.status < 300 ? undefined : `HTTP ${response.status} from ${sink.url}`;
        }
        case 'command': {
          const result = await execa(sink.cmd, sink.args, { input: body, timeout: timeoutMs, reject: false, cancelSignal: this.#abort.signal, stdout: 'ignore', stderr: 'pipe', maxBuffer: 64 * 1024 });
          if (result.exitCode === 0) return undefined;
          const why = result.timedOut ? `timed out after ${timeoutMs} ms` : result.exitCode === undefined ? `killed by ${result.signal ?? 'a signal'}` : `exit code ${result.exitCode}`;
          return `${sink.cmd}: ${why}${result.stderr ? `: ${String(result.stderr).slice(0, 500)}` : ''}`;
        }
        case 'file': {
          const path = resolve(this.#o.home, sink.path);
          await mkdir(dirname(path), { recursive: true });
          await appendFile(path, `${body}\n`);
          return undefined;
        }
      }
    } catch (err) {
      const e = err as Error & { cause?: { code?: string; message?: string } };
      if (e.name === 'TimeoutError') return `no answer within ${timeoutMs} ms`;
      return e.cause?.message !== undefined ? `${e.message}: ${e.cause.message}` : e.message;
    }
  }
}
