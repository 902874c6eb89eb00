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
export { FileRunStore, currentOwner, cursorOf, leaseIsLive, type FileRunStoreOptions } from './store/index.js';
export { Daemon, findDaemons, type DaemonFile, type DaemonOptions } from './host/daemon.js';
export { createApiServer, type ApiServerOptions } from './host/http/server.js';
export { DaemonClient, type DaemonHealth, type EventsOptions, type RunView, type StartRequest } from './client/daemon-client.js';
export { DELIVERY_KINDS, type DeliveryKind, type DeliveryOptions, type Sink } from './host/delivery/config.js';
export { DELIVERY_HEADER, SIGNATURE_HEADER, signBody, type DeliveryPayload } from './host/delivery/deliverer.js';
export type * from './store/run-store.js';
