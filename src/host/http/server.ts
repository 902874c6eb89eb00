/**
 * The daemon's HTTP control API (fastify). Every route needs the bearer
 * token; every body and query is validated with the schemas of
 * `protocol/http.ts`; every error is JSON `{ code, message, field? }` with a
 * proper status (see `errors.ts`).
 *
 * ```
 * POST   /runs                      start a run: { spec, specPath?, cwd?, runId? } or { template, args }
 * GET    /runs                      list: ?state=&outcome=&name=&since=&after=&limit=&all=
 * GET    /runs/:id                  { record, spec, owner }
 * POST   /runs/:id/resume           { spec?, specPath? } to re-supply secrets
 * POST   /runs/:id/cancel|steer|approve
 * DELETE /runs/:id
 * GET    /runs/:id/evidence         ?id= a specific bundle
 * GET    /runs/:id/events           server-sent events; resumes after Last-Event-ID
 * GET    /deliveries                ?status=pending|dead|all
 * POST   /deliveries/retry          { ids } or { all: true }
 * GET    /health                    what the daemon holds
 * GET    /metrics                   Prometheus text format
 * ```
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { RunwardenError, ValidationError } from '../../protocol/errors.js';
import { TERMINAL_STATES } from '../../protocol/events.js';
import {
  ApproveBodySchema,
  CancelBodySchema,
  DeliveriesQuerySchema,
  EventsQuerySchema,
  EvidenceQuerySchema,
  LAST_EVENT_ID,
  ListQuerySchema,
  ResumeBodySchema,
  RetryDeliveriesBodySchema,
  StartRunBodySchema,
  SteerBodySchema,
} from '../../protocol/http.js';
import { assertRunId } from '../../protocol/ids.js';
import { zodIssues } from '../../protocol/validation.js';
import { cursorOf } from '../../store/run-query.js';
import type { Host } from '../host.js';
import { buildTemplate } from '../templates.js';
import { toHttpError } from './errors.js';

export interface ApiServerOptions {
  host: Host;
  /** The bearer token every request must carry. */
  token: string;
  /** Extra fields of `GET /health` (the daemon adds its own). */
  health?: () => Record<string, unknown>;
  /** How often an event stream looks for new events. @default 200 */
  eventPollMs?: number;
  /** How often an idle event stream sends a comment to keep proxies from closing it. @default 15000 */
  keepAliveMs?: number;
}

/** Parse `value` with `schema`, or throw `OPTION_INVALID` naming the field. */
function parse<S extends z.ZodType>(schema: S, value: unknown, what: 'request body' | 'query'): z.infer<S> {
  const parsed = schema.safeParse(value ?? {});
  if (parsed.success) return parsed.data;
  let issues = zodIssues(parsed.error);
  // A query parameter is one field, whatever shape it parses into (`state=a,b` is `state`, not `state[1]`).
  if (what === 'query') issues = issues.map((i) => ({ ...i, path: i.path.split(/[.[]/)[0] ?? i.path }));
  throw new ValidationError('OPTION_INVALID', what, issues);
}

/** A path parameter that must be a run id. */
function runIdOf(request: FastifyRequest): string {
  const id = (request.params as { id: string }).id;
  assertRunId(id);
  return id;
}

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

/**
 * Build (not start) the API server for a host.
 * @example const app = await createApiServer({ host, token }); await app.listen({ port: 7411, host: '127.0.0.1' });
 */
export async function createApiServer(options: ApiServerOptions): Promise<FastifyInstance> {
  const { host } = options;
  const eventPollMs = options.eventPollMs ?? 200;
  const keepAliveMs = options.keepAliveMs ?? 15_000;
  const expected = digest(`Bearer ${options.token}`);
  const streams = new Set<ServerResponse>();
  let closing = false;

  const app = Fastify({ logger: false, bodyLimit: 8 * 1024 * 1024, return503OnClosing: true, forceCloseConnections: true });

  // JSON only (a text/plain body is refused with 415), and optional on control routes: an empty body is `{}`.
  app.removeContentTypeParser('text/plain');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = String(body);
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch (err) {
      const e = new Error((err as Error).message) as Error & { statusCode: number; code: string };
      e.statusCode = 400;
      e.code = 'FST_ERR_CTP_INVALID_JSON';
      done(e, undefined);
    }
  });

  app.addHook('onRequest', async (request, reply) => {
    const given = request.headers.authorization;
    if (given === undefined || !timingSafeEqual(digest(given), expected)) {
      await reply
        .code(401)
        .header('www-authenticate', 'Bearer realm="runwarden"')
        .send({ code: 'UNAUTHORIZED', message: `missing or wrong bearer token: send "Authorization: Bearer <token>" with the token in ${host.options.home}/daemon.token` });
    }
  });

  app.setErrorHandler(async (err, request, reply) => {
    const { status, body } = toHttpError(err);
    if (status >= 500) host.logger.error({ err, method: request.method, url: request.url }, 'HTTP request failed');
    await reply.code(status).send(body);
  });
  app.setNotFoundHandler(async (request, reply) => {
    await reply.code(404).send({ code: 'ROUTE_NOT_FOUND', message: `no route ${request.method} ${request.url.split('?')[0]}` });
  });

  app.addHook('onClose', async () => {
    closing = true;
    for (const res of streams) res.end();
    streams.clear();
  });

  // ---------------------------------------------------------------- runs

  app.post('/runs', async (request, reply) => {
    const body = parse(StartRunBodySchema, request.body, 'request body');
    let spec = body.spec;
    if (body.template !== undefined) spec = buildTemplate(body.template, body.args ?? {});
    if (body.runId !== undefined) assertRunId(body.runId);
    let handle;
    try {
      handle = await host.start({
        spec,
        ...(body.specPath === undefined ? {} : { specPath: body.specPath }),
        ...(body.cwd === undefined ? {} : { cwd: body.cwd }),
        ...(body.runId === undefined ? {} : { runId: body.runId }),
      });
    } catch (err) {
      // Name the field as the body has it: the spec's fields live under `spec`.
      if (err instanceof RunwardenError && err.code === 'SPEC_INVALID' && body.template === undefined) {
        throw new RunwardenError('SPEC_INVALID', err.message, { field: err.field === undefined ? 'spec' : `spec.${err.field}` });
      }
      throw err;
    }
    await reply.code(201).send({ runId: handle.runId, state: handle.record.state });
  });

  app.get('/runs', async (request) => {
    const q = parse(ListQuerySchema, request.query, 'query');
    const runs = await host.list({
      includeChildren: q.all === true,
      ...(q.state === undefined ? {} : { state: q.state }),
      ...(q.outcome === undefined ? {} : { outcome: q.outcome }),
      ...(q.name === undefined ? {} : { name: q.name }),
      ...(q.since === undefined ? {} : { since: q.since }),
      ...(q.after === undefined ? {} : { after: q.after }),
      limit: q.limit + 1,
    });
    const page = runs.slice(0, q.limit);
    const last = page[page.length - 1];
    return { runs: page, next: runs.length > q.limit && last !== undefined ? cursorOf(last) : null };
  });

  app.get('/runs/:id', async (request) => {
    const run = await host.show(runIdOf(request));
    const owner = run.lease === undefined ? null : { pid: run.lease.pid, host: run.lease.host, fence: run.lease.fence, live: host.store.isLeaseLive(run.lease) };
    return { record: run.record, spec: run.spec, owner, location: host.store.locate(run.record.runId) ?? null };
  });

  app.post('/runs/:id/resume', async (request, reply) => {
    const runId = runIdOf(request);
    const body = parse(ResumeBodySchema, request.body, 'request body');
    const handle = await host.resume(runId, { ...(body.spec === undefined ? {} : { spec: body.spec }), ...(body.specPath === undefined ? {} : { specPath: body.specPath }) });
    await reply.code(202).send({ runId: handle.runId, state: handle.record.state });
  });

  app.post('/runs/:id/cancel', async (request) => {
    const runId = runIdOf(request);
    const body = parse(CancelBodySchema, request.body, 'request body');
    return host.control(runId, 'cancel', body.waitMs === undefined ? {} : { waitMs: body.waitMs });
  });

  app.post('/runs/:id/steer', async (request) => {
    const runId = runIdOf(request);
    const body = parse(SteerBodySchema, request.body, 'request body');
    return host.control(runId, 'steer', { text: body.text, ...(body.waitMs === undefined ? {} : { waitMs: body.waitMs }) });
  });

  app.post('/runs/:id/approve', async (request) => {
    const runId = runIdOf(request);
    const body = parse(ApproveBodySchema, request.body, 'request body');
    return host.control(runId, body.reject === true ? 'reject' : 'approve', { ...(body.reason === undefined ? {} : { text: body.reason }), ...(body.waitMs === undefined ? {} : { waitMs: body.waitMs }) });
  });

  app.delete('/runs/:id', async (request) => {
    return { deleted: await host.delete(runIdOf(request)) };
  });

  app.get('/runs/:id/evidence', async (request) => {
    const runId = runIdOf(request);
    const q = parse(EvidenceQuerySchema, request.query, 'query');
    const found = await host.evidence(runId, q.id);
    return { evidenceId: found.evidenceId, location: found.location ?? null, bundle: found.bundle };
  });

  app.get('/runs/:id/events', async (request, reply) => {
    const runId = runIdOf(request);
    const q = parse(EventsQuerySchema, request.query, 'query');
    const header = request.headers[LAST_EVENT_ID];
    let after = q.after ?? 0;
    if (header !== undefined) {
      const n = Number(header);
      if (typeof header !== 'string' || !Number.isInteger(n) || n < 0) throw new RunwardenError('OPTION_INVALID', `Last-Event-ID must be an event seq (a non-negative integer); received ${String(header)}`, { field: 'last-event-id' });
      after = n;
    }
    await host.show(runId); // 404 before the stream starts
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' });
    res.write('retry: 1000\n\n');
    streams.add(res);
    let open = true;
    request.raw.on('close', () => {
      open = false;
    });
    let lastWrite = Date.now();
    try {
      while (open && !closing) {
        for (const event of await host.store.readEvents(runId, after)) {
          res.write(`id: ${event.seq}\ndata: ${JSON.stringify(event)}\n\n`);
          after = event.seq;
          lastWrite = Date.now();
        }
        if (!q.follow) break;
        const run = await host.store.load(runId).catch(() => undefined);
        if (run === undefined) {
          res.write(`event: gone\ndata: ${JSON.stringify({ runId })}\n\n`);
          break;
        }
        if (TERMINAL_STATES.has(run.record.state) && run.record.seq <= after) {
          res.write(`event: end\ndata: ${JSON.stringify({ runId, state: run.record.state, outcome: run.record.outcome, seq: run.record.seq })}\n\n`);
          break;
        }
        if (Date.now() - lastWrite >= keepAliveMs) {
          res.write(': keep-alive\n\n');
          lastWrite = Date.now();
        }
        await new Promise((r) => setTimeout(r, eventPollMs));
      }
    } catch (err) {
      host.logger.warn({ runId, err: (err as Error).message }, 'event stream failed');
    } finally {
      streams.delete(res);
      res.end();
    }
  });

  // ---------------------------------------------------------------- deliveries

  app.get('/deliveries', async (request) => {
    const q = parse(DeliveriesQuerySchema, request.query, 'query');
    const outbox = host.deliverer.outbox;
    const pending = q.status === 'dead' ? [] : [...(await outbox.list('pending')), ...(await outbox.list('inflight'))];
    const dead = q.status === 'pending' ? [] : await outbox.list('dead');
    return { pending, dead };
  });

  app.post('/deliveries/retry', async (request) => {
    const body = parse(RetryDeliveriesBodySchema, request.body, 'request body');
    const retried = await host.deliverer.outbox.retry(body.all === true ? 'all' : body.ids!);
    host.deliverer.kick();
    return { retried };
  });

  // ---------------------------------------------------------------- health and metrics

  app.get('/health', async () => {
    const schedulers = host.schedulerStats();
    const pools = host.poolStats();
    return {
      ok: true,
      pid: process.pid,
      home: host.options.home,
      ownerId: host.owner.ownerId,
      driving: host.drivenRuns(),
      executions: { running: schedulers.process.running + schedulers.thread.running, queued: schedulers.process.queued + schedulers.thread.queued },
      workers: { process: pools.process.workersAlive, thread: pools.thread.workersAlive },
      deliveries: await host.deliverer.outbox.counts(),
      ...options.health?.(),
    };
  });

  app.get('/metrics', async (_request, reply: FastifyReply) => {
    const { contentType, text } = await host.metrics.render();
    await reply.header('content-type', contentType).send(text);
  });

  return app;
}
