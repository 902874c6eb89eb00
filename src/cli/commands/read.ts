/** Commands that read runs: list, show, events, evidence. */
import type { Command } from 'commander';
import type { EvidenceBundle } from '../../host/kernel/evidence.js';
import { RunwardenError } from '../../protocol/errors.js';
import { TERMINAL_STATES } from '../../protocol/events.js';
import { err, globals, out, positiveInt, withHost } from '../io.js';
import { formatEvent, formatList, formatMs, formatRun, table } from '../render.js';
import { EXIT, exitCodeFor } from '../report.js';

export function registerReadCommands(program: Command): void {
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
        out(formatRun(run.record, run.spec, run.lease, live, host.store.locate(runId), evidence));
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
        const bundle = JSON.parse(raw.toString('utf8')) as EvidenceBundle;
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
}
