/** Commands that read runs: list, show, events, evidence. */
import { InvalidArgumentError, type Command } from 'commander';
import { RUN_OUTCOMES, RUN_STATES, TERMINAL_STATES, type RunOutcome, type RunState } from '../../protocol/events.js';
import type { ListOptions } from '../../store/run-store.js';
import { withClient } from '../client.js';
import { err, globals, out, positiveInt } from '../io.js';
import { formatEvent, formatList, formatMs, formatRun, table } from '../render.js';
import { EXIT, exitCodeFor } from '../report.js';

/** A comma-separated list of values from `allowed`. */
function oneOf<T extends string>(allowed: readonly T[]) {
  return (value: string): T[] => {
    const values = value.split(',').map((v) => v.trim()).filter((v) => v !== '');
    const bad = values.filter((v) => !allowed.includes(v as T));
    if (values.length === 0 || bad.length > 0) throw new InvalidArgumentError(`expected one or more of ${allowed.join(', ')} (comma-separated)`);
    return values as T[];
  };
}

/** `--limit`: 1 to 10000. */
function limitArg(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 10_000) throw new InvalidArgumentError('expected a whole number from 1 to 10000');
  return n;
}

function isoTime(value: string): string {
  if (!/^\d{4}-\d{2}-\d{2}(T[\d:.]+(Z|[+-]\d{2}:?\d{2})?)?$/.test(value) || Number.isNaN(Date.parse(value))) throw new InvalidArgumentError('expected an ISO-8601 date or date-time, like 2026-11-29 or 2026-11-29T10:00:00Z');
  return new Date(value).toISOString();
}

export function registerReadCommands(program: Command): void {
  program
    .command('list')
    .description('list runs, newest created first')
    .option('--all', 'include subflow child runs')
    .option('--state <states>', `only these states (${RUN_STATES.join(', ')}; comma-separated)`, oneOf(RUN_STATES))
    .option('--outcome <outcomes>', `only these outcomes (${RUN_OUTCOMES.join(', ')})`, oneOf(RUN_OUTCOMES))
    .option('--name <name>', 'only runs of the spec with exactly this name')
    .option('--since <time>', 'only runs updated at or after this time (ISO-8601)', isoTime)
    .option('--limit <n>', 'at most this many, 1-10000 (default 100)', limitArg)
    .option('--after <cursor>', 'the next page: the cursor printed after the previous one')
    .option('--json', 'machine-readable output: { runs, next }')
    .action(async (opts: { all?: boolean; state?: RunState[]; outcome?: RunOutcome[]; name?: string; since?: string; limit?: number; after?: string; json?: boolean }, cmd: Command) => {
      await withClient(globals(cmd), async (client) => {
        const options: ListOptions = { includeChildren: opts.all === true, limit: opts.limit ?? 100 };
        if (opts.state !== undefined) options.state = opts.state;
        if (opts.outcome !== undefined) options.outcome = opts.outcome;
        if (opts.name !== undefined) options.name = opts.name;
        if (opts.since !== undefined) options.since = opts.since;
        if (opts.after !== undefined) options.after = opts.after;
        const page = await client.list(options);
        if (opts.json === true) {
          out(JSON.stringify(page, null, 2));
          return;
        }
        out(formatList(page.runs));
        if (page.next !== null) err(`more runs: runwarden list --after ${page.next}${opts.limit === undefined ? '' : ` --limit ${opts.limit}`}`);
      });
    });

  program
    .command('show')
    .description('show a run: state, outcome, usage, nodes and their attempts')
    .argument('<runId>')
    .option('--json', 'the run record as JSON')
    .option('--spec', 'print the spec the run executes (as stored, secrets removed)')
    .action(async (runId: string, opts: { json?: boolean; spec?: boolean }, cmd: Command) => {
      await withClient(globals(cmd), async (client) => {
        const run = await client.show(runId);
        if (opts.spec === true) {
          out(JSON.stringify(run.spec, null, 2));
          return;
        }
        if (opts.json === true) {
          out(JSON.stringify({ ...run.record, owner: run.owner }, null, 2));
          return;
        }
        const evidenceId = run.record.lastVerdict?.evidenceId;
        const evidence = evidenceId === undefined || run.location === null ? undefined : `${run.location}/evidence/${evidenceId}`;
        out(formatRun(run.record, run.spec, run.owner, run.location ?? undefined, evidence));
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
      await withClient(globals(cmd), async (client) => {
        await client.show(runId);
        const abort = new AbortController();
        let stoppedBy: 'signal' | 'ownerless' | undefined;
        const onSignal = (): void => {
          stoppedBy ??= 'signal';
          abort.abort();
        };
        process.on('SIGINT', onSignal);
        // A run nobody drives will not move: say so rather than wait forever.
        let ownerlessSince: number | undefined;
        const watch =
          opts.follow === true
            ? setInterval(() => {
                void client
                  .show(runId)
                  .then((run) => {
                    const driven = run.owner?.live === true || TERMINAL_STATES.has(run.record.state);
                    ownerlessSince = driven ? undefined : (ownerlessSince ?? Date.now());
                    if (ownerlessSince !== undefined && Date.now() - ownerlessSince >= 2000) {
                      stoppedBy ??= 'ownerless';
                      abort.abort();
                    }
                  })
                  .catch(() => undefined);
              }, 1000)
            : undefined;
        try {
          for await (const e of client.events(runId, { after: opts.after ?? 0, follow: opts.follow === true, signal: abort.signal })) {
            if (opts.json === true) out(JSON.stringify(e));
            else {
              const line = formatEvent(e);
              if (line !== undefined) out(line);
            }
          }
        } finally {
          clearInterval(watch);
          process.off('SIGINT', onSignal);
        }
        if (opts.follow !== true || stoppedBy === 'signal') return;
        const run = await client.show(runId);
        if (stoppedBy === 'ownerless' && !TERMINAL_STATES.has(run.record.state)) {
          err(`no process is driving run ${runId} (${run.record.state}); continue it with: runwarden resume ${runId}`);
          process.exitCode = EXIT.failed;
          return;
        }
        process.exitCode = TERMINAL_STATES.has(run.record.state) ? exitCodeFor(run.record) : EXIT.failed;
      });
    });

  program
    .command('evidence')
    .description('show the evidence bundle behind a run’s verdict')
    .argument('<runId>')
    .option('--evidence-id <id>', 'a specific bundle (default: the last verdict)')
    .option('--json', 'the bundle as JSON')
    .action(async (runId: string, opts: { evidenceId?: string; json?: boolean }, cmd: Command) => {
      await withClient(globals(cmd), async (client) => {
        const { evidenceId, bundle, location } = await client.evidence(runId, opts.evidenceId);
        if (opts.json === true) {
          out(JSON.stringify(bundle, null, 2));
          return;
        }
        out(`evidence ${evidenceId}: ${bundle.passed ? 'passed' : 'failed'} (run ${runId}, node ${bundle.node}, attempt ${bundle.attempt})`);
        out(`tree digest ${bundle.digest ?? '(not a git repository)'}${bundle.head !== null ? ` at HEAD ${bundle.head.slice(0, 12)}` : ''}`);
        out(
          table(
            ['CHECK', 'REQUIRED', 'RESULT', 'TIME', 'DETAIL'],
            bundle.results.map((r) => [r.id, r.required ? 'yes' : 'no', r.passed ? 'passed' : 'FAILED', formatMs(r.durationMs), r.detail]),
          ),
        );
        if (location !== null) out(`bundle: ${location}`);
      });
    });
}
