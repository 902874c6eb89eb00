/** Delivery settings (`delivery` in `config.json`): the sinks and the retry schedule. */
import { z } from 'zod';

/** What a delivery reports: a run ended, parked at a human gate, or breached a budget. */
export const DELIVERY_KINDS = ['run.ended', 'run.parked', 'budget.breached'] as const;
export type DeliveryKind = (typeof DELIVERY_KINDS)[number];

const sinkBase = {
  /** Names the sink in delivery ids, listings and logs. Letters, digits, `-` and `_`. */
  name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1-64 letters, digits, - or _'),
  /** Which kinds this sink receives. @default all */
  events: z.array(z.enum(DELIVERY_KINDS)).min(1).optional(),
};

export const SinkSchema = z.discriminatedUnion('type', [
  z.strictObject({
    ...sinkBase,
    type: z.literal('webhook'),
    url: z.url({ protocol: /^https?$/, error: (issue) => (issue.input === undefined ? 'required: the http(s) URL to POST to' : 'must be an http(s) URL') }),
    /** The HMAC-SHA256 key, given directly… */
    secret: z.string().min(1).optional(),
    /** …or, better, named: the environment variable of the host that holds it. */
    secretEnv: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name').optional(),
    /** One attempt's limit. @default delivery.timeoutMs */
    timeoutMs: z.number().int().min(1).max(600_000).optional(),
  }),
  z.strictObject({
    ...sinkBase,
    type: z.literal('command'),
    /** A program run with the delivery JSON on stdin; exit 0 acknowledges. */
    cmd: z.string().min(1),
    args: z.array(z.string()).default([]),
    timeoutMs: z.number().int().min(1).max(600_000).optional(),
  }),
  z.strictObject({
    ...sinkBase,
    type: z.literal('file'),
    /** A file to append the delivery JSON to, one line each (relative paths resolve against the store home). */
    path: z.string().min(1),
  }),
]);
export type Sink = z.infer<typeof SinkSchema>;

export const DeliveryOptionsSchema = z
  .strictObject({
    sinks: z.array(SinkSchema).max(64).default([]),
    /** Attempts per obligation before it becomes a dead letter. @default 8 */
    maxAttempts: z.number().int().min(1).max(1000).default(8),
    /** Delay before the first retry; doubles per attempt, with full jitter. @default 1000 */
    backoffMs: z.number().int().min(1).max(3_600_000).default(1000),
    /** The longest delay between attempts. @default 300000 (5 minutes) */
    maxBackoffMs: z.number().int().min(1).max(86_400_000).default(300_000),
    /** One attempt's limit for webhook and command sinks. @default 10000 */
    timeoutMs: z.number().int().min(1).max(600_000).default(10_000),
    /** How often the outbox is checked for due obligations. @default 500 */
    pollMs: z.number().int().min(10).max(60_000).default(500),
  })
  .superRefine((d, ctx) => {
    const seen = new Set<string>();
    d.sinks.forEach((s, i) => {
      if (seen.has(s.name)) ctx.addIssue({ code: 'custom', path: ['sinks', i, 'name'], message: `duplicate sink name ${s.name}` });
      seen.add(s.name);
      if (s.type === 'webhook' && s.secret !== undefined && s.secretEnv !== undefined) ctx.addIssue({ code: 'custom', path: ['sinks', i, 'secretEnv'], message: 'give secret or secretEnv, not both' });
    });
  });
export type DeliveryOptions = z.infer<typeof DeliveryOptionsSchema>;
