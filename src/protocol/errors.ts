/**
 * Typed errors and the closed registry of error codes.
 *
 * Every error runwarden raises, and every `error.code` recorded on a node
 * attempt or a run, is one of {@link ERROR_CODES}. `docs/ERRORS.md` lists them
 * all; a test fails when a code is missing from it.
 */

/** Every error code, with the one-line meaning the docs repeat. */
export const ERROR_CODES = {
  // Input at a boundary (spec, CLI flag, config, IPC message).
  SPEC_INVALID: 'A workflow spec failed validation; `field` names the first offending field.',
  RUN_ID_INVALID: 'A run id is empty, too long, or contains a path separator or `..`.',
  CONFIG_INVALID: 'The host configuration (`config.json` or options) failed validation.',
  OPTION_INVALID: 'A command-line flag or argument is invalid.',
  IPC_INVALID: 'A message between host and worker failed validation and was refused.',
  // Run lifecycle and ownership.
  RUN_EXISTS: 'A run with this id already exists; ids are never reused while the run exists.',
  RUN_NOT_FOUND: 'No run with this id exists in the store.',
  RUN_TERMINAL: 'The run has already ended; it cannot be resumed or controlled.',
  LEASE_HELD: 'Another live owner holds the run; the message names its pid and host.',
  SUPERSEDED: 'This owner lost the run to a newer claim; it stopped writing.',
  STORE_BLOCKED: 'The store could not take a write now (lock contention or a disk fault); nothing was written.',
  STORE_CORRUPT: 'A run directory could not be read back and could not be rebuilt from its events.',
  SECRETS_REQUIRED: 'The run needs secrets (custom-engine env) that were not re-supplied on resume.',
  SPEC_MISMATCH: 'The spec given to re-supply secrets differs from the spec the run started with.',
  CONTROL_REFUSED: 'A control request (approve, reject) did not apply to the run in its current state.',
  EVIDENCE_NOT_FOUND: 'The run has no evidence bundle of that id (no verifier has run, or its verdict came from a child run).',
  TEMPLATE_NOT_FOUND: 'No built-in workflow template has that name.',
  // The daemon and its HTTP API.
  UNAUTHORIZED: 'An HTTP request without the daemon\'s bearer token (or with a wrong one).',
  ROUTE_NOT_FOUND: 'No HTTP route matches the method and path.',
  DAEMON_UNAVAILABLE: 'The daemon could not be started or reached (port in use, not answering, gone mid-request).',
  // Node attempt failures recorded on the run.
  COMMAND_FAILED: 'A command exited with a status other than the expected one.',
  COMMAND_NOT_FOUND: 'The executable of a command, check or engine could not be started.',
  TIMEOUT: "The attempt ran past its node's `timeoutMs`; its process tree was killed.",
  WORKER_LOST: 'The worker exited or crashed while it held the execution; the claim was re-queued.',
  HEARTBEAT_TIMEOUT: 'The worker stopped heartbeating; it was killed and the claim re-queued.',
  PREEMPTED: 'A background execution gave its slot to foreground work; the node runs again later without using a retry.',
  HOST_LOST: 'The host died while the execution was in flight; the claim was re-queued on resume.',
  REQUEUE_LIMIT: 'The node lost its worker or host more than `maxRequeues` times.',
  WORKER_START_FAILED: 'A worker process could not be started or did not report ready.',
  EXECUTOR_FAILED: 'The executor inside the worker failed unexpectedly.',
  SCRIPT_FAILED: 'A script node\'s function threw, was not found, or returned a value that is not JSON.',
  POLICY_DENIED: 'The runtime policy refused the action: a command not in `commands`, a working directory outside `fs`.',
  BUDGET_EXCEEDED: 'An execution or the run went past a budget limit; `detail` names the limit, its value and the measured value. Never retried.',
  ENGINE_FAILED: 'An agent engine exited with an error.',
  ENGINE_UNSUPPORTED: 'The agent engine is not available in this version (only `custom` is).',
  CHECKS_FAILED: 'One or more required contract checks failed.',
  FANOUT_FAILED: 'One or more fan-out members failed.',
  GATE_REJECTED: 'A human gate was rejected.',
  SUBFLOW_FAILED: 'The child run of a subflow node did not complete.',
  MAX_VISITS: 'A node was visited more than `maxNodeVisits` times.',
  REFUTED: "The run's last verdict failed: the contract does not hold.",
  CANCELLED: 'The run was cancelled.',
  INTERNAL_ERROR: 'runwarden itself failed while driving the run (a bug); the run was failed so that it does not hang, and the log has the details.',
} as const;

/** A stable error code: the key of {@link ERROR_CODES}. */
export type ErrorCode = keyof typeof ERROR_CODES;

/** Options shared by every runwarden error. */
export interface RunwardenErrorOptions {
  /** The field (dotted path) the error is about, when one is. */
  field?: string;
  /** The underlying error. */
  cause?: unknown;
}

/**
 * The base class of every error runwarden throws. `code` is stable and listed
 * in `docs/ERRORS.md`; `field` names the offending input field when there is one.
 */
export class RunwardenError extends Error {
  readonly code: ErrorCode;
  readonly field: string | undefined;

  constructor(code: ErrorCode, message: string, options: RunwardenErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'RunwardenError';
    this.code = code;
    this.field = options.field;
  }

  /** The JSON shape used by the CLI's `--json` output and the HTTP API. */
  toJSON(): { code: ErrorCode; message: string; field?: string } {
    return this.field === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, field: this.field };
  }
}

/** True for any error raised by runwarden (including subclasses). */
export function isRunwardenError(value: unknown): value is RunwardenError {
  return value instanceof RunwardenError;
}

/** One problem found while validating input. `path` is dotted: `nodes[2].routes[0].to`. */
export interface ValidationIssue {
  path: string;
  message: string;
}

/** A spec (or config, or message) failed validation. `issues` holds every problem found. */
export class ValidationError extends RunwardenError {
  readonly issues: readonly ValidationIssue[];

  constructor(code: ErrorCode, what: string, issues: readonly ValidationIssue[]) {
    const shown = issues.slice(0, 8).map((i) => `  ${i.path || '(root)'}: ${i.message}`);
    if (issues.length > shown.length) shown.push(`  … and ${issues.length - shown.length} more`);
    super(code, `${what} is invalid:\n${shown.join('\n')}`, { field: issues[0]?.path || undefined });
    this.name = 'ValidationError';
    this.issues = issues;
  }
}

/** A workflow spec failed validation. */
export class SpecError extends ValidationError {
  constructor(issues: readonly ValidationIssue[], what = 'workflow spec') {
    super('SPEC_INVALID', what, issues);
    this.name = 'SpecError';
  }
}

/** Details of the owner holding a run, as recorded in its lease. */
export interface LeaseOwnerInfo {
  ownerId: string;
  pid: number;
  host: string;
  renewedAt: string;
}

/** The run is held by another live owner. */
export class LeaseHeldError extends RunwardenError {
  readonly owner: LeaseOwnerInfo;

  constructor(runId: string, owner: LeaseOwnerInfo, hint?: string) {
    super(
      'LEASE_HELD',
      `run ${runId} is live elsewhere: held by pid ${owner.pid} on host ${owner.host} (owner ${owner.ownerId}, renewed ${owner.renewedAt})${hint === undefined ? '' : `; ${hint}`}`,
    );
    this.name = 'LeaseHeldError';
    this.owner = owner;
  }
}
