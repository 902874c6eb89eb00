/** Commands that start or continue runs: demo, run, resume. */
import { dirname, resolve } from 'node:path';
import type { Command } from 'commander';
import { compileHostOptions } from '../../host/host-options.js';
import { compileCeiling } from '../../host/policy.js';
import { loadSpec } from '../../host/spec-loader.js';
import { assertRunId } from '../../protocol/ids.js';
import { startInBackground } from '../background.js';
import { daemonFor, remoteClient as remote } from '../client.js';
import { createDemoProject, demoSpec } from '../demo.js';
import { err, globals, out, readSpecArg, withHost } from '../io.js';
import { followRemote, waitAndReport } from '../report.js';

export function registerStartCommands(program: Command): void {
  program
    .command('demo')
    .description('repair-until-green on a fresh demo repository: an agent fixes, the verifier runs the real tests, routers loop until green')
    .option('--dir <path>', 'create the demo project here instead of a temporary directory')
    .option('--json', 'print events as JSON lines')
    .action(async (opts: { dir?: string; json?: boolean }, cmd: Command) => {
      const g = globals(cmd);
      const repo = await createDemoProject(opts.dir === undefined ? undefined : resolve(opts.dir));
      const json = opts.json === true;
      if (!json) out(`demo project: ${repo} (a statistics library whose node --test tests fail)`);
      const daemon = await daemonFor(g);
      if (daemon !== undefined) {
        const { runId } = await daemon.start({ spec: demoSpec(repo), cwd: repo });
        if (!json) err(`run ${runId} started in the daemon at ${daemon.url}`);
        process.exitCode = await followRemote(remote(g, daemon), runId, json);
      } else {
        process.exitCode = await withHost(g, async (host) => waitAndReport(host, await host.start({ spec: demoSpec(repo), cwd: repo }), json));
      }
      if (!json) out(`repository: ${repo}  (git -C ${repo} diff shows the agent's fix)`);
    });

  program
    .command('run')
    .description('start a run of a workflow spec (a JSON file, or - for stdin); in the daemon when one runs, else in a background process')
    .argument('<spec>', 'spec file')
    .option('--id <runId>', 'the run id (refused if it exists)')
    .option('--wait', 'stay in the foreground, print each transition, exit with the run')
    .option('--json', 'machine-readable output')
    .action(async (specArg: string, opts: { id?: string; wait?: boolean; json?: boolean }, cmd: Command) => {
      const g = globals(cmd);
      const { spec, specPath } = readSpecArg(specArg);
      // Validate in the foreground before anything touches the store: bad input writes nothing.
      if (opts.id !== undefined) assertRunId(opts.id, '--id');
      const hostOptions = compileHostOptions(g.home === undefined ? {} : { home: g.home });
      loadSpec(spec, { baseDir: specPath === undefined ? process.cwd() : dirname(specPath), maxDepth: hostOptions.subflowMaxDepth, ceiling: compileCeiling(hostOptions.policy) });
      const request = { spec, cwd: process.cwd(), ...(specPath === undefined ? {} : { specPath }), ...(opts.id === undefined ? {} : { runId: opts.id }) };
      const daemon = await daemonFor(g);
      if (daemon !== undefined) {
        const { runId } = await daemon.start(request);
        if (opts.wait === true) {
          if (opts.json !== true) err(`run ${runId} started in the daemon at ${daemon.url} (Ctrl-C stops following; the run goes on)`);
          process.exitCode = await followRemote(remote(g, daemon), runId, opts.json === true);
          return;
        }
        if (opts.json === true) out(JSON.stringify({ runId, pid: daemon.daemon?.pid ?? null, daemon: daemon.url }));
        else {
          out(runId);
          err(`started in the daemon at ${daemon.url}; follow it with: runwarden events ${runId} --follow`);
        }
        return;
      }
      if (opts.wait === true) {
        process.exitCode = await withHost(g, async (host) => waitAndReport(host, await host.start(request), opts.json === true));
        return;
      }
      const started = await startInBackground(hostOptions.home, { mode: 'start', ...request });
      if (opts.json === true) out(JSON.stringify({ runId: started.runId, pid: started.pid, daemon: null }));
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
      const daemon = await daemonFor(g);
      if (daemon !== undefined) {
        await daemon.resume(runId, resumeOptions);
        if (opts.wait === true) {
          process.exitCode = await followRemote(remote(g, daemon), runId, opts.json === true);
          return;
        }
        if (opts.json === true) out(JSON.stringify({ runId, pid: daemon.daemon?.pid ?? null, daemon: daemon.url }));
        else err(`run ${runId} resumed in the daemon at ${daemon.url}; follow it with: runwarden events ${runId} --follow`);
        return;
      }
      if (opts.wait === true) {
        process.exitCode = await withHost(g, async (host) => waitAndReport(host, await host.resume(runId, resumeOptions), opts.json === true));
        return;
      }
      const home = compileHostOptions(g.home === undefined ? {} : { home: g.home }).home;
      const started = await startInBackground(home, { mode: 'resume', runId, ...resumeOptions });
      if (opts.json === true) out(JSON.stringify({ runId: started.runId, pid: started.pid, daemon: null }));
      else err(`run ${runId} resumed in the background (pid ${started.pid}); follow it with: runwarden events ${runId} --follow`);
    });
}
