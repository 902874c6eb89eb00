/**
 * The worker process entry. A host forks this file with an IPC channel; see
 * `runtime.ts`. Options come from the environment the host sets:
 * `RUNWARDEN_KILL_GRACE_MS`.
 */
import { startWorkerRuntime } from './runtime.js';

const grace = Number(process.env.RUNWARDEN_KILL_GRACE_MS);
startWorkerRuntime(Number.isFinite(grace) && grace > 0 ? { killGraceMs: grace } : {});
