export { Host, defaultWorkerEntry, type ControlAction, type ControlReceipt, type HostOpenOptions, type ResumeOptions, type RunHandle, type StartOptions } from './host.js';
export { HostOptionsSchema, compileHostOptions, resolveHome, type CompiledHostOptions, type HostOptions } from './host-options.js';
export { loadSpec, loadSpecFile, readSpecFile, type LoadedSpec, type SecretMap } from './spec-loader.js';
export type { DriveResult, StopReason } from './kernel/run-driver.js';
export type { EvidenceBundle } from './kernel/evidence.js';
export type { PoolStats } from './pool/execution.js';
