/**
 * Host metrics in Prometheus form (prom-client), served by the daemon at
 * `GET /metrics`. Gauges are read when scraped; counters and the commit
 * latency histogram are fed by the kernel as it commits.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { RUN_STATES, type RunEvent } from '../protocol/events.js';
import type { RunStore } from '../store/run-store.js';
import type { PoolStats } from './pool/execution.js';
import type { Outbox } from './delivery/outbox.js';
import { deliverableKinds } from './delivery/deliverer.js';

/** What the metrics read from the host when scraped. */
export interface MetricsSource {
  store: RunStore;
  outbox: Outbox;
  drivenRuns(): number;
  schedulers(): Record<'process' | 'thread', { running: number; queued: number; preempted: number }>;
  pools(): Record<'process' | 'thread', PoolStats>;
}

export class HostMetrics {
  readonly registry = new Registry();
  readonly #commit: Histogram;
  readonly #breaches: Counter;
  readonly #deliveries: Counter;

  constructor(source: MetricsSource) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    new Gauge({
      name: 'runwarden_runs',
      help: 'Runs in the store, by state (subflow children included).',
      labelNames: ['state'],
      registers,
      async collect() {
        const counts = new Map<string, number>(RUN_STATES.map((s) => [s, 0]));
        for (const run of await source.store.list({ includeChildren: true }).catch(() => [])) if ('state' in run) counts.set(run.state, (counts.get(run.state) ?? 0) + 1);
        this.reset();
        for (const [state, n] of counts) this.set({ state }, n);
      },
    });
    new Gauge({
      name: 'runwarden_runs_driven',
      help: 'Runs this host is driving now.',
      registers,
      collect() {
        this.set(source.drivenRuns());
      },
    });
    const perIsolation = (name: string, help: string, read: (i: 'process' | 'thread') => number): void => {
      new Gauge({
        name,
        help,
        labelNames: ['isolation'],
        registers,
        collect() {
          for (const isolation of ['process', 'thread'] as const) this.set({ isolation }, read(isolation));
        },
      });
    };
    perIsolation('runwarden_executions_in_flight', 'Executions holding a slot (dispatched to a worker, or about to be).', (i) => source.schedulers()[i].running);
    perIsolation('runwarden_queue_depth', 'Executions waiting for a slot.', (i) => source.schedulers()[i].queued);
    perIsolation('runwarden_workers', 'Live workers (processes or threads).', (i) => source.pools()[i].workersAlive);
    perIsolation('runwarden_claims_lost', 'Claims lost to dead or silent workers since the host started.', (i) => source.pools()[i].lostClaims);
    perIsolation('runwarden_preemptions', 'Background executions preempted for foreground work since the host started.', (i) => source.schedulers()[i].preempted);
    new Gauge({
      name: 'runwarden_deliveries',
      help: 'Delivery obligations in the outbox, by status.',
      labelNames: ['status'],
      registers,
      async collect() {
        const counts = await source.outbox.counts();
        for (const [status, n] of Object.entries(counts)) this.set({ status }, n);
      },
    });
    this.#breaches = new Counter({ name: 'runwarden_budget_breaches_total', help: 'Budget breaches committed by this host.', registers });
    this.#deliveries = new Counter({ name: 'runwarden_delivery_attempts_total', help: 'Delivery attempts by outcome.', labelNames: ['outcome', 'sink'], registers });
    this.#commit = new Histogram({
      name: 'runwarden_commit_duration_seconds',
      help: 'Latency of store commits (stage, publish, apply, with fsyncs).',
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    });
  }

  /** Feed one commit: its latency and events. */
  committed(durationMs: number, events: readonly RunEvent[]): void {
    this.#commit.observe(durationMs / 1000);
    const breaches = deliverableKinds(events).filter((d) => d.kind === 'budget.breached').length;
    if (breaches > 0) this.#breaches.inc(breaches);
  }

  delivery(outcome: string, sink: string): void {
    this.#deliveries.inc({ outcome, sink });
  }

  /** The exposition text and its content type. */
  async render(): Promise<{ contentType: string; text: string }> {
    return { contentType: this.registry.contentType, text: await this.registry.metrics() };
  }
}
