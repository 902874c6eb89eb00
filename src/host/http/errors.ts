/** How errors become HTTP answers: a status code and `{ code, message, field? }`. */
import { isRunwardenError, type ErrorCode } from '../../protocol/errors.js';

const STATUS: Partial<Record<ErrorCode, number>> = {
  SPEC_INVALID: 400,
  RUN_ID_INVALID: 400,
  CONFIG_INVALID: 400,
  OPTION_INVALID: 400,
  SECRETS_REQUIRED: 400,
  SPEC_MISMATCH: 400,
  TEMPLATE_NOT_FOUND: 400,
  UNAUTHORIZED: 401,
  RUN_NOT_FOUND: 404,
  EVIDENCE_NOT_FOUND: 404,
  ROUTE_NOT_FOUND: 404,
  RUN_EXISTS: 409,
  RUN_TERMINAL: 409,
  LEASE_HELD: 409,
  CONTROL_REFUSED: 409,
  STORE_BLOCKED: 503,
  DAEMON_UNAVAILABLE: 503,
};

export interface ErrorBody {
  code: ErrorCode;
  message: string;
  field?: string;
}

/** The status code of a runwarden error. */
export function statusOf(code: ErrorCode): number {
  return STATUS[code] ?? 500;
}

/** Fastify's own errors (bad JSON, wrong content type, body too large) as runwarden errors. */
function fromFastify(err: { code?: string; statusCode?: number; message: string }): { status: number; body: ErrorBody } | undefined {
  if (typeof err.statusCode !== 'number' || err.statusCode < 400 || err.statusCode >= 500) return undefined;
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return { status: 415, body: { code: 'OPTION_INVALID', message: 'the body must be JSON (content-type: application/json)', field: 'content-type' } };
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { status: 413, body: { code: 'OPTION_INVALID', message: `the body is too large: ${err.message}`, field: 'body' } };
    default:
      return { status: err.statusCode, body: { code: 'OPTION_INVALID', message: `the body is not valid JSON: ${err.message}`, field: 'body' } };
  }
}

/** Any thrown value as a status and body. Unknown errors are 500 `INTERNAL_ERROR`. */
export function toHttpError(err: unknown): { status: number; body: ErrorBody } {
  if (isRunwardenError(err)) {
    const json = err.toJSON();
    return { status: statusOf(err.code), body: json };
  }
  const fastify = fromFastify(err as { code?: string; statusCode?: number; message: string });
  if (fastify !== undefined) return fastify;
  return { status: 500, body: { code: 'INTERNAL_ERROR', message: `the daemon failed: ${(err as Error).message ?? String(err)}` } };
}
