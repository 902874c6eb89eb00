export { startWorkerRuntime, type WorkerRuntimeOptions } from './runtime.js';
export { workspaceDigest, type WorkspaceDigest } from './executors/digest.js';
