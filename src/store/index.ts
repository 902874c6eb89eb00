export type * from './run-store.js';
export { FileRunStore, leaseHeld, type FileRunStoreOptions, type StoreLogger } from './file/file-run-store.js';
export { DEFAULT_LEASE_TTL_MS, currentOwner, leaseIsLive, pidAlive } from './liveness.js';
export { cursorOf, selectRuns } from './run-query.js';
