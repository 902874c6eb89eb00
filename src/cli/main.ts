/**
 * The `runwarden` command line. Thin: every command goes through the host.
 *
 * Exit codes: 0 the run completed (verified or unverified); 1 it failed, was
 * refuted or cancelled, stopped early, or the command failed; 2 bad input (an
 * invalid spec, flag or run id, an unknown or finished run, a run held
 * elsewhere); 130 / 143 stopped by SIGINT / SIGTERM.
 */
import { resolve } from 'node:path';
import { Command, CommanderError } from 'commander';
import { isRunwardenError, type ErrorCode } from '../protocol/errors.js';
import { registerControlCommands } from './commands/control.js';
import { registerDaemonCommands } from './commands/daemon.js';
import { registerReadCommands } from './commands/read.js';
import { registerStartCommands } from './commands/start.js';
import { err, out } from './io.js';
import { EXIT } from './report.js';

/** Codes that mean the input was wrong: exit 2. */
const INPUT_ERRORS: ReadonlySet<ErrorCode> = new Set([
  'SPEC_INVALID',
  'RUN_ID_INVALID',
  'CONFIG_INVALID',
  'OPTION_INVALID',
  'RUN_EXISTS',
  'RUN_NOT_FOUND',
  'RUN_TERMINAL',
  'LEASE_HELD',
  'SECRETS_REQUIRED',
  'SPEC_MISMATCH',
  'CONTROL_REFUSED',
  'EVIDENCE_NOT_FOUND',
  'TEMPLATE_NOT_FOUND',
]);

export function buildProgram(): Command {
  const program = new Command();
  program
    .name('runwarden')
    .description('A durable, multi-process supervisor for workflow runs.\nStore: $RUNWARDEN_HOME (default ~/.runwarden), or --home.')
    .version('0.1.0')
    .option('--home <dir>', 'store root (overrides $RUNWARDEN_HOME)')
    .option('--no-daemon', 'never go through a daemon: use a host in this process even when a daemon runs')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s) });
  registerStartCommands(program);
  registerReadCommands(program);
  registerControlCommands(program);
  registerDaemonCommands(program);
  return program;
}
/** Run the CLI; sets `process.exitCode`. */
export async function main(argv: string[]): Promise<void> {
  // A reader that stops early (`| head`) is not an error.
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw e;
  });
  const program = buildProgram();
  const wantsJson = argv.includes('--json');
  const homeAt = argv.indexOf('--home');
  if (homeAt >= 0 && argv[homeAt + 1] !== undefined) process.env.RUNWARDEN_HOME = resolve(argv[homeAt + 1]!);
  try {
    await program.parseAsync(argv);
  } catch (e) {
    if (e instanceof CommanderError) {
      process.exitCode = e.exitCode === 0 ? 0 : EXIT.usage;
      return;
    }
    if (isRunwardenError(e)) {
      if (wantsJson) out(JSON.stringify({ error: e.toJSON() }));
      err(`error [${e.code}]: ${e.message}`);
      process.exitCode = INPUT_ERRORS.has(e.code) ? EXIT.usage : EXIT.failed;
      return;
    }
    err(`error: ${(e as Error).stack ?? String(e)}`);
    process.exitCode = EXIT.failed;
  }
}
