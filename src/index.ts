/**
 * runwarden: a durable, multi-process supervisor for workflow runs.
 *
 * @example
 * import { Host } from 'runwarden';
 * const host = await Host.open();
 * const run = await host.start({ spec: { name: 'hello', nodes: [{ id: 'hi', kind: 'command', cmd: 'echo', args: ['hi'] }] } });
 * const { record } = await run.done; // record.state === 'completed', record.outcome === 'unverified'
 * await host.close();
 */
export * from './protocol/index.js';
export * from './host/index.js';
export { FileRunStore, currentOwner, leaseIsLive, type FileRunStoreOptions } from './store/index.js';
export type * from './store/run-store.js';
