/**
 * Run, node and execution identifiers.
 *
 * Run ids name a directory in the file store, so they are restricted to a safe
 * character set: letters, digits, `.`, `_` and `-`, not starting with `.` or
 * `-`, not ending with `.`, at most {@link MAX_RUN_ID_LENGTH} characters, never
 * containing `..`.
 */
import { randomBytes } from 'node:crypto';
import { RunwardenError } from './errors.js';

/** The longest run id accepted, in characters. */
export const MAX_RUN_ID_LENGTH = 128;

const RUN_ID = /^[A-Za-z0-9_](?:[A-Za-z0-9._-]*[A-Za-z0-9_-])?$/;

/**
 * Node ids and fan-out member names: the run-id set, at most 64 characters,
 * not ending with '.', never containing `..` (checked separately).
 */
export const NODE_ID = /^[A-Za-z0-9_](?:[A-Za-z0-9._-]{0,62}[A-Za-z0-9_-])?$/;

/** Why `id` is not a valid run id, or undefined when it is. */
export function runIdProblem(id: unknown): string | undefined {
  if (typeof id !== 'string') return `expected a string, received ${typeof id}`;
  if (id.length === 0) return 'must not be empty';
  if (id.length > MAX_RUN_ID_LENGTH) return `must be at most ${MAX_RUN_ID_LENGTH} characters (received ${id.length})`;
  if (id.includes('..')) return `must not contain '..' (received '${id}')`;
  if (!RUN_ID.test(id)) {
    return `may contain only letters, digits, '.', '_' and '-', must not start with '.' or '-' and must not end with '.' (received '${id}')`;
  }
  return undefined;
}

/**
 * Check a run id.
 * @throws {RunwardenError} `RUN_ID_INVALID`, naming the problem.
 */
export function assertRunId(id: unknown, field = 'runId'): asserts id is string {
  const problem = runIdProblem(id);
  if (problem !== undefined) {
    throw new RunwardenError('RUN_ID_INVALID', `${field}: ${problem}`, { field });
  }
}

/** A fresh run id: `run-<base36 ms>-<6 hex>`, sortable by creation time. */
export function newRunId(): string {
  return `run-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}`;
}

/** The execution id of attempt `attempt` of `nodeId`, optionally one fan-out member of it. */
export function executionId(runId: string, nodeId: string, attempt: number, member?: string): string {
  const base = `${runId}/${nodeId}/a${attempt}`;
  return member === undefined ? base : `${base}/${member}`;
}

/**
 * The id of the child run a subflow attempt starts: `<parent>.<node>.a<n>`,
 * shortened with a hash suffix when it would exceed {@link MAX_RUN_ID_LENGTH}.
 */
export function childRunId(parentRunId: string, nodeId: string, attempt: number, hash: (s: string) => string): string {
  const id = `${parentRunId}.${nodeId}.a${attempt}`;
  if (id.length <= MAX_RUN_ID_LENGTH) return id;
  const suffix = `.${hash(id).slice(0, 12)}`;
  return id.slice(0, MAX_RUN_ID_LENGTH - suffix.length).replace(/[.-]+$/, '') + suffix;
}
