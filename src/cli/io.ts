/** What every command shares: output, global options, a host for the command's duration, spec arguments. */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { InvalidArgumentError, type Command } from 'commander';
import { Host } from '../host/host.js';
import { readSpecFile } from '../host/spec-loader.js';
import { RunwardenError } from '../protocol/errors.js';

export const out = (line: string): void => {
  process.stdout.write(`${line}\n`);
};
export const err = (line: string): void => {
  process.stderr.write(`${line}\n`);
};

/** Options every command inherits. */
export interface Globals {
  home?: string;
  /** `false` with `--no-daemon`: never go through a daemon. */
  daemon?: boolean;
}

export const globals = (cmd: Command): Globals => cmd.optsWithGlobals() as Globals;

/** Run `fn` with a host opened on the store, closing it afterwards whatever happens. */
export async function withHost<T>(g: Globals, fn: (host: Host) => Promise<T>): Promise<T> {
  const host = await Host.open(g.home === undefined ? {} : { home: g.home });
  try {
    return await fn(host);
  } finally {
    await host.close();
  }
}

/**
 * Read a spec argument: a file, or `-` for stdin.
 * @throws {SpecError} `SPEC_INVALID` when it cannot be read or is not JSON.
 */
export function readSpecArg(path: string): { spec: unknown; specPath?: string } {
  if (path === '-') {
    try {
      return { spec: JSON.parse(readFileSync(0, 'utf8')) };
    } catch (e) {
      throw new RunwardenError('SPEC_INVALID', `spec on stdin is not valid JSON: ${(e as Error).message}`, { field: 'spec' });
    }
  }
  const abs = resolve(path);
  return { spec: readSpecFile(abs), specPath: abs };
}

export function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError('expected a non-negative integer');
  return n;
}
