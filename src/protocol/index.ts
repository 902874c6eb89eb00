export * from './errors.js';
export * from './ids.js';
export * from './conditions.js';
export * from './spec.js';
export * from './events.js';
export * from './record.js';
export * from './ipc.js';
