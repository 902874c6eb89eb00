/** Field schemas shared by specs and contracts. */
import { z } from 'zod';
import { NODE_ID } from './ids.js';

/** The default bound on visits of any one node. */
export const DEFAULT_MAX_NODE_VISITS = 50;
/** The default `timeoutMs` of a command check: 10 minutes. */
export const DEFAULT_CHECK_TIMEOUT_MS = 600_000;
/** The longest timeout accepted anywhere: 7 days. */
export const MAX_TIMEOUT_MS = 7 * 24 * 3_600_000;

export const nonEmpty = z.string().min(1, 'must not be empty');
export const nodeId = z
  .string()
  .regex(NODE_ID, "must be 1-64 letters, digits, '.', '_' or '-', starting with a letter, digit or '_' and not ending with '.'")
  .refine((s) => !s.includes('..'), "must not contain '..'")
  .refine((s) => s !== '__proto__', "'__proto__' is reserved");
export const durationMs = z.number().int('must be an integer number of milliseconds').min(1, 'must be at least 1 ms').max(MAX_TIMEOUT_MS, 'must be at most 7 days');
export const envMap = z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be a valid environment variable name'), z.string());
/** A path relative to the run's cwd that stays inside it. */
export const relativePath = nonEmpty.refine(
  (p) => !p.startsWith('/') && !/^[A-Za-z]:[\\/]/.test(p) && !p.split(/[\\/]/).includes('..'),
  'must be a relative path inside the run cwd (no leading / and no ..)',
);

/**
 * Whether a value survives JSON: no functions, BigInt, non-finite numbers or
 * cycles. Object properties that are undefined are allowed (JSON leaves them out).
 */
export function isJsonValue(value: unknown, seen = new Set<object>()): boolean {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return true;
  if (typeof value === 'number') return Number.isFinite(value);
  if (typeof value !== 'object') return false;
  if (seen.has(value)) return false;
  seen.add(value);
  const proto: unknown = Object.getPrototypeOf(value);
  const ok = Array.isArray(value)
    ? value.every((v) => isJsonValue(v, seen))
    : (proto === Object.prototype || proto === null) && Object.values(value).every((v) => v === undefined || isJsonValue(v, seen));
  seen.delete(value);
  return ok;
}

/** Any JSON value. */
export const jsonValue = z.unknown().refine((v) => isJsonValue(v), 'must be a JSON value (no functions, undefined, BigInt, NaN or cycles)');
