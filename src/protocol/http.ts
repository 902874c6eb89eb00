/**
 * The daemon's HTTP API: request bodies and query strings, validated at the
 * boundary with the same zod schemas the CLI and library use. Responses are
 * JSON; errors are `{ code, message, field? }` (see `errors.ts`).
 */
import { z } from 'zod';
import { RUN_OUTCOMES, RUN_STATES } from './events.js';

const absolutePath = (what: string) => z.string().min(1).refine((p) => p.startsWith('/'), `${what} must be an absolute path`);

/** `POST /runs`: a spec (an object, validated as a workflow spec), or a template name with arguments. */
export const StartRunBodySchema = z
  .strictObject({
    spec: z.unknown().optional(),
    /** The file the spec came from (on the daemon's machine): relative paths in the spec resolve against its directory. */
    specPath: absolutePath('specPath').optional(),
    /** The cwd of a spec that sets none. @default the daemon's working directory */
    cwd: absolutePath('cwd').optional(),
    runId: z.string().optional(),
    template: z.string().min(1).optional(),
    args: z.record(z.string(), z.unknown()).optional(),
  })
  .superRefine((body, ctx) => {
    if ((body.spec === undefined) === (body.template === undefined)) ctx.addIssue({ code: 'custom', path: ['spec'], message: 'give exactly one of spec and template' });
    if (body.args !== undefined && body.template === undefined) ctx.addIssue({ code: 'custom', path: ['args'], message: 'args go with a template' });
  });
export type StartRunBody = z.infer<typeof StartRunBodySchema>;

/** `POST /runs/:id/resume`: the spec the run started with, to re-supply its secrets. */
export const ResumeBodySchema = z.strictObject({
  spec: z.unknown().optional(),
  specPath: absolutePath('specPath').optional(),
});

const waitMs = z.number().int().min(0).max(600_000).optional();

/** `POST /runs/:id/cancel`. */
export const CancelBodySchema = z.strictObject({ waitMs });
/** `POST /runs/:id/steer`. */
export const SteerBodySchema = z.strictObject({ text: z.string().trim().min(1, 'must not be empty').max(100_000), waitMs });
/** `POST /runs/:id/approve`: approve, or with `reject: true` reject, the gate a run is parked at. */
export const ApproveBodySchema = z.strictObject({ reject: z.boolean().optional(), reason: z.string().max(100_000).optional(), waitMs });

/** A comma-separated list of values from `values`. */
const csv = <T extends string>(values: readonly [T, ...T[]]) =>
  z
    .string()
    .transform((s) => s.split(',').map((v) => v.trim()).filter((v) => v !== ''))
    .pipe(z.array(z.enum(values)).min(1));

/** `GET /runs`: filters and paging. */
export const ListQuerySchema = z.strictObject({
  state: csv(RUN_STATES).optional(),
  outcome: csv(RUN_OUTCOMES).optional(),
  name: z.string().min(1).optional(),
  since: z.iso.datetime({ offset: true, message: 'must be an ISO-8601 date-time' }).optional(),
  after: z.string().min(1).optional(),
  limit: z.coerce.number().int().min(1).max(10_000).default(100),
  /** `true` to include subflow child runs. */
  all: z.enum(['true', 'false']).transform((v) => v === 'true').optional(),
});
export type ListQuery = z.infer<typeof ListQuerySchema>;

/** `GET /runs/:id/events`: where to start (the `Last-Event-ID` header wins), and whether to stop at the end of the log. */
export const EventsQuerySchema = z.strictObject({
  after: z.coerce.number().int().min(0).optional(),
  /** `false`: send what is there and close, rather than follow the run to its end. */
  follow: z.enum(['true', 'false']).transform((v) => v === 'true').default(true),
});

/** `GET /runs/:id/evidence`. */
export const EvidenceQuerySchema = z.strictObject({ id: z.string().min(1).optional() });

/** `GET /deliveries`. */
export const DeliveriesQuerySchema = z.strictObject({ status: z.enum(['pending', 'dead', 'all']).default('all') });

/** `POST /deliveries/retry`: dead letters back to pending, by id, or all of them. */
export const RetryDeliveriesBodySchema = z
  .strictObject({ ids: z.array(z.string().min(1)).min(1).optional(), all: z.literal(true).optional() })
  .refine((b) => (b.ids === undefined) !== (b.all === undefined), { message: 'give ids or all: true', path: ['ids'] });

/** The header that carries a server-sent event id on reconnection. */
export const LAST_EVENT_ID = 'last-event-id';
