/**
 * The `runwarden` command line. Thin: every command goes through the host.
 *
 * Exit codes: 0 the run completed (verified or unverified); 1 it failed, was
 * refuted or cancelled, or the command failed; 2 bad input (an invalid spec,
 * flag or run id, an unknown run, a run held elsewhere); 130 interrupted.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { Host } from '../host/host.js';
import { compileHostOptions } from '../host/host-options.js';
import { loadSpec, readSpecFile } from '../host/spec-loader.js';
import { RunwardenError, isRunwardenError, type ErrorCode } from '../protocol/errors.js';
import { TERMINAL_STATES } from '../protocol/events.js';
import { assertRunId } from '../protocol/ids.js';
import type { RunRecord } from '../protocol/record.js';
import { backgroundHostMain, startInBackground } from './background.js';
import { createDemoProject, demoSpec } from './demo.js';
import { formatEvent, formatList, formatMs, formatRun, table } from './render.js';
import { EXIT, exitCodeFor, followRun } from './report.js';

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
]);

const out = (line: string): void => {
  process.stdout.write(`${line}\n`);
};
const err = (line: string): void => {
  process.stderr.write(`${line}\n`);
};

interface Globals {
  home?: string;
  json?: boolean;
}

function readSpecArg(path: string): { spec: unknown; specPath?: string } {
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

async function withHost<T>(globals: Globals, fn: (host: Host) => Promise<T>): Promise<T> {
  const host = await Host.open(globals.home === undefined ? {} : { home: globals.home });
  try {
    return await fn(host);
  } finally {
    await host.close();
  }
}

/** Wait for a run in the foreground and report it. Returns the exit code. */
async function waitAndReport(host: Host, handle: Awaited<ReturnType<Host['start']>>, json: boolean): Promise<number> {
  const { record, interrupted, stopped, error } = await followRun(host, handle, { json, out, err });
  if (error !== undefined) err(`error${isRunwardenError(error) ? ` [${error.code}]` : ''}: ${error.message}`);
  if (!json) summarize(host, record, stopped);
  if (interrupted !== undefined && !TERMINAL_STATES.has(record.state)) return interrupted === 'SIGTERM' ? EXIT.terminated : EXIT.interrupted;
  if (stopped !== undefined && !TERMINAL_STATES.has(record.state)) return EXIT.failed;
  return exitCodeFor(record);
}

function summarize(host: Host, record: RunRecord, stopped: string | undefined): void {
  const ended = TERMINAL_STATES.has(record.state);
  out('');
  out(`run ${record.runId} ${record.state} · ${record.outcome}${record.outcomeReason !== undefined ? ` (${record.outcomeReason})` : ''}`);
  if (record.error !== undefined) out(`error: ${record.error.code}: ${record.error.message}`);
  if (record.lastVerdict?.evidenceId !== undefined) out(`evidence: ${host.store.locate(record.runId, `evidence/${record.lastVerdict.evidenceId}`)}`);
  if (!ended) out(`the run is not finished (${stopped ?? 'stopped'}); continue it with: runwarden resume ${record.runId}`);
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError('expected a non-negative integer');
  return n;
}

export function buildProgram(): Command {
  const program = new Command();
  program
    .name('runwarden')
    .description('A durable, multi-process supervisor for workflow runs.\nStore: $RUNWARDEN_HOME (default ~/.runwarden), or --home.')
    .version('0.1.0')
    .option('--home <dir>', 'store root (overrides $RUNWARDEN_HOME)')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s) });
  const globals = (cmd: Command): Globals => cmd.optsWithGlobals() as Globals;

  program
    .command('demo')
    .description('repair-until-green on a fresh demo repository: an agent fixes, the verifier runs the real tests, routers loop until green')
    .option('--dir <path>', 'create the demo project here instead of a temporary directory')
    .option('--json', 'print events as JSON lines')
    .action(async (opts: { dir?: string; json?: boolean }, cmd: Command) => {
      const repo = await createDemoProject(opts.dir === undefined ? undefined : resolve(opts.dir));
      if (opts.json !== true) out(`demo project: ${repo} (a statistics library whose node --test tests fail)`);
      process.exitCode = await withHost(globals(cmd), async (host) => {
        const handle = await host.start({ spec: demoSpec(repo), cwd: repo });
        const code = await waitAndReport(host, handle, opts.json === true);
        if (opts.json !== true) out(`repository: ${repo}  (git -C ${repo} diff shows the agent's fix)`);
        return code;
      });
    });

  program
    .command('run')
    .description('start a run of a workflow spec (a JSON file, or - for stdin)')
    .argument('<spec>', 'spec file')
    .option('--id <runId>', 'the run id (refused if it exists)')
    .option('--wait', 'stay in the foreground, print each transition, exit with the run')
    .option('--json', 'machine-readable output')
    .action(async (specArg: string, opts: { id?: string; wait?: boolean; json?: boolean }, cmd: Command) => {
      const g = globals(cmd);
      const { spec, specPath } = readSpecArg(specArg);
      // Validate in the foreground before anything touches the store: bad input writes nothing.
      if (opts.id !== undefined) assertRunId(opts.id, '--id');
      loadSpec(spec, { baseDir: specPath === undefined ? process.cwd() : dirname(specPath) });
      if (opts.wait === true) {
        process.exitCode = await withHost(g, async (host) => {
          const handle = await host.start({ spec, cwd: process.cwd(), ...(specPath === undefined ? {} : { specPath }), ...(opts.id === undefined ? {} : { runId: opts.id }) });
          return waitAndReport(host, handle, opts.json === true);
        });
        return;
      }
      const home = compileHostOptions(g.home === undefined ? {} : { home: g.home }).home;
      const started = await startInBackground(home, { mode: 'start', spec, cwd: process.cwd(), ...(specPath === undefined ? {} : { specPath }), ...(opts.id === undefined ? {} : { runId: opts.id }) });
      if (opts.json === true) out(JSON.stringify({ runId: started.runId, pid: started.pid }));
      else {
        out(started.runId);
        err(`started in the background (pid ${started.pid}); follow it with: runwarden events ${started.runId} --follow`);
      }
    });

  program
    .command('resume')
    .description('continue a run at its recorded position (after a crash, an interruption, or in another process)')
    .argument('<runId>')
    .option('--spec <file>', 'the spec the run started with, to re-supply its secrets (custom-engine env)')
    .option('--wait', 'stay in the foreground until the run ends')
    .option('--json', 'machine-readable output')
    .action(async (runId: string, opts: { spec?: string; wait?: boolean; json?: boolean }, cmd: Command) => {
      const g = globals(cmd);
      const given = opts.spec === undefined ? undefined : readSpecArg(opts.spec);
      const resumeOptions = given === undefined ? {} : { spec: given.spec, ...(given.specPath === undefined ? {} : { specPath: given.specPath }) };
      if (opts.wait === true) {
        process.exitCode = await withHost(g, async (host) => waitAndReport(host, await host.resume(runId, resumeOptions), opts.json === true));
        return;
      }
      const home = compileHostOptions(g.home === undefined ? {} : { home: g.home }).home;
      const started = await startInBackground(home, { mode: 'resume', runId, ...resumeOptions });
      if (opts.json === true) out(JSON.stringify({ runId: started.runId, pid: started.pid }));
      else err(`run ${runId} resumed in the background (pid ${started.pid}); follow it with: runwarden events ${runId} --follow`);
    });

  program
    .command('list')
    .description('list runs, newest first')
    .option('--all', 'include subflow child runs')
    .option('--limit <n>', 'at most this many', positiveInt)
    .option('--json', 'machine-readable output')
    .action(async (opts: { all?: boolean; limit?: number; json?: boolean }, cmd: Command) => {
      await withHost(globals(cmd), async (host) => {
        let runs = await host.list({ includeChildren: opts.all === true });
        if (opts.limit !== undefined) runs = runs.slice(0, opts.limit);
        out(opts.json === true ? JSON.stringify(runs, null, 2) : formatList(runs));
      });
    });

  program
    .command('show')
    .description('show a run: state, outcome, usage, nodes and their attempts')
    .argument('<runId>')
    .option('--json', 'the run record as JSON')
    .option('--spec', 'print the spec the run executes (as stored, secrets removed)')
    .action(async (runId: string, opts: { json?: boolean; spec?: boolean }, cmd: Command) => {
      await withHost(globals(cmd), async (host) => {
        const run = await host.show(runId);
        if (opts.spec === true) {
          out(JSON.stringify(run.spec, null, 2));
          return;
        }
        const live = run.lease !== undefined && host.store.isLeaseLive(run.lease);
        if (opts.json === true) {
          out(JSON.stringify({ ...run.record, owner: run.lease === undefined ? null : { pid: run.lease.pid, host: run.lease.host, live, fence: run.lease.fence } }, null, 2));
          return;
        }
        const evidence = run.record.lastVerdict?.evidenceId === undefined ? undefined : host.store.locate(runId, `evidence/${run.record.lastVerdict.evidenceId}`);
        out(formatRun(run.record, run.lease, live, host.store.locate(runId), evidence));
      });
    });

  program
    .command('events')
    .description("print a run's events; with --follow, until the run ends (exit 0 completed, 1 otherwise)")
    .argument('<runId>')
    .option('--follow', 'keep printing new events until the run ends, or until no process is driving it')
    .option('--after <seq>', 'only events after this seq', positiveInt)
    .option('--json', 'JSON lines')
    .action(async (runId: string, opts: { follow?: boolean; after?: number; json?: boolean }, cmd: Command) => {
      await withHost(globals(cmd), async (host) => {
        await host.show(runId);
        let after = opts.after ?? 0;
        let stop = false;
        let ownerlessSince: number | undefined;
        let lastOwnerCheck = 0;
        const onSignal = (): void => {
          stop = true;
        };
        process.on('SIGINT', onSignal);
        try {
          for (;;) {
            for (const e of await host.store.readEvents(runId, after)) {
              after = e.seq;
              if (opts.json === true) out(JSON.stringify(e));
              else {
                const line = formatEvent(e);
                if (line !== undefined) out(line);
              }
            }
            if (opts.follow !== true || stop) return;
            const run = await host.show(runId);
            if (TERMINAL_STATES.has(run.record.state) && run.record.seq <= after) {
              process.exitCode = exitCodeFor(run.record);
              return;
            }
            // A run nobody drives will not move: say so rather than wait forever.
            if (Date.now() - lastOwnerCheck >= 1000) {
              lastOwnerCheck = Date.now();
              const driven = run.lease !== undefined && host.store.isLeaseLive(run.lease);
              ownerlessSince = driven ? undefined : (ownerlessSince ?? Date.now());
              if (ownerlessSince !== undefined && Date.now() - ownerlessSince >= 2000) {
                err(`no process is driving run ${runId} (${run.record.state}); continue it with: runwarden resume ${runId}`);
                process.exitCode = EXIT.failed;
                return;
              }
            }
            await new Promise((r) => setTimeout(r, 200));
          }
        } finally {
          process.off('SIGINT', onSignal);
        }
      });
    });

  const control = (name: 'cancel' | 'steer' | 'approve', description: string): Command =>
    program.command(name).description(description).argument('<runId>').option('--json', 'machine-readable output');

  control('cancel', 'cancel a run, wherever it is being driven').action(async (runId: string, opts: { json?: boolean }, cmd: Command) => {
    await reportControl(cmd, runId, 'cancel', undefined, opts.json === true);
  });
  control('steer', "add guidance, prepended to the next agent node's prompt")
    .argument('<text>', 'the guidance')
    .action(async (runId: string, text: string, opts: { json?: boolean }, cmd: Command) => {
      await reportControl(cmd, runId, 'steer', text, opts.json === true);
    });
  control('approve', 'answer the human gate a run is parked at')
    .option('--reject', 'reject instead of approve')
    .option('--reason <text>', 'why (recorded)')
    .action(async (runId: string, opts: { json?: boolean; reject?: boolean; reason?: string }, cmd: Command) => {
      await reportControl(cmd, runId, opts.reject === true ? 'reject' : 'approve', opts.reason, opts.json === true);
    });

  async function reportControl(cmd: Command, runId: string, action: 'cancel' | 'steer' | 'approve' | 'reject', text: string | undefined, json: boolean): Promise<void> {
    await withHost(globals(cmd), async (host) => {
      const receipt = await host.control(runId, action, text === undefined ? {} : { text });
      if (json) out(JSON.stringify(receipt));
      else if (receipt.status === 'applied') out(`${action} applied to run ${runId}${receipt.by !== undefined ? ` by ${receipt.by}` : ''}`);
      else if (receipt.status === 'queued') out(`${action} queued for run ${runId}${receipt.by !== undefined ? `; held by ${receipt.by}, which applies it at its next check` : ''}`);
      if (receipt.status === 'refused') {
        throw new RunwardenError('CONTROL_REFUSED', `${action} refused by run ${runId}: ${receipt.reason ?? 'no reason given'}`);
      }
      const run = await host.show(runId);
      if (receipt.status === 'applied' && action !== 'cancel' && (run.lease === undefined || !host.store.isLeaseLive(run.lease)) && !TERMINAL_STATES.has(run.record.state) && !json) {
        err(`no process holds run ${runId}; it takes effect when the run continues: runwarden resume ${runId}`);
      }
    });
  }

  program
    .command('evidence')
    .description('show the evidence bundle behind a run’s verdict')
    .argument('<runId>')
    .option('--evidence-id <id>', 'a specific bundle (default: the last verdict)')
    .option('--json', 'the bundle as JSON')
    .action(async (runId: string, opts: { evidenceId?: string; json?: boolean }, cmd: Command) => {
      await withHost(globals(cmd), async (host) => {
        const run = await host.show(runId);
        const verdict = run.record.lastVerdict;
        if (opts.evidenceId === undefined && verdict?.childRunId !== undefined) {
          throw new RunwardenError('EVIDENCE_NOT_FOUND', `run ${runId}'s verdict came from its subflow child run ${verdict.childRunId}: runwarden evidence ${verdict.childRunId}`, { field: 'runId' });
        }
        const id = opts.evidenceId ?? verdict?.evidenceId;
        if (id === undefined) throw new RunwardenError('EVIDENCE_NOT_FOUND', `run ${runId} has no evidence: no verifier has run`, { field: 'runId' });
        const raw = await host.store.readArtifact(runId, `evidence/${id}/bundle.json`);
        if (raw === undefined) throw new RunwardenError('EVIDENCE_NOT_FOUND', `run ${runId} has no evidence bundle ${id}`, { field: 'evidence-id' });
        const bundle = JSON.parse(raw.toString('utf8')) as import('../host/kernel/evidence.js').EvidenceBundle;
        if (opts.json === true) {
          out(JSON.stringify(bundle, null, 2));
          return;
        }
        const dir = host.store.locate(runId, `evidence/${id}`);
        out(`evidence ${id}: ${bundle.passed ? 'passed' : 'failed'} (run ${runId}, node ${bundle.node}, attempt ${bundle.attempt})`);
        out(`tree digest ${bundle.digest ?? '(not a git repository)'}${bundle.head !== null ? ` at HEAD ${bundle.head.slice(0, 12)}` : ''}`);
        out(
          table(
            ['CHECK', 'REQUIRED', 'RESULT', 'TIME', 'DETAIL'],
            bundle.results.map((r) => [r.id, r.required ? 'yes' : 'no', r.passed ? 'passed' : 'FAILED', formatMs(r.durationMs), r.detail]),
          ),
        );
        out(`bundle: ${dir}`);
      });
    });

  program
    .command('delete')
    .description('delete a run (and its subflow child runs); its id may then be reused')
    .argument('<runId>')
    .option('--json', 'machine-readable output')
    .action(async (runId: string, opts: { json?: boolean }, cmd: Command) => {
      await withHost(globals(cmd), async (host) => {
        const deleted = await host.delete(runId);
        out(opts.json === true ? JSON.stringify({ deleted }) : `deleted ${deleted.join(', ')}`);
      });
    });

  program.command('background-host', { hidden: true }).action(async () => {
    await backgroundHostMain();
  });

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
