/** Commands of the daemon: serve, status, stop, deliveries. */
import { spawn } from 'node:child_process';
import { fstatSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Option, type Command } from 'commander';
import { DaemonClient } from '../../client/daemon-client.js';
import { Daemon, findDaemons } from '../../host/daemon.js';
import type { Obligation } from '../../host/delivery/outbox.js';
import { compileHostOptions, resolveHome } from '../../host/host-options.js';
import { RunwardenError } from '../../protocol/errors.js';
import { pidAlive } from '../../store/liveness.js';
import { withClient } from '../client.js';
import { err, globals, out, positiveInt } from '../io.js';
import { formatMs, table } from '../render.js';
import { EXIT } from '../report.js';

const BIN = fileURLToPath(new URL('../../../bin/runwarden.js', import.meta.url));

function port(value: string): number {
  const n = positiveInt(value);
  if (n > 65_535) throw new RunwardenError('OPTION_INVALID', `--port must be at most 65535; received ${value}`, { field: 'port' });
  return n;
}

export function registerDaemonCommands(program: Command): void {
  program
    .command('serve')
    .description('run the daemon: the HTTP API on 127.0.0.1, adopting runs nobody drives; SIGTERM or Ctrl-C stops it cleanly')
    .option('--port <n>', 'TCP port on 127.0.0.1 (0: any free port; default 7411 or config.json "port")', port)
    .option('--detach', 'start in the background and return once it answers')
    .action(async (opts: { port?: number; detach?: boolean }, cmd: Command) => {
      const g = globals(cmd);
      const home = resolveHome(g.home);
      if (opts.detach === true) {
        await detach(home, opts.port);
        return;
      }
      const daemon = await Daemon.start({ home, pretty: true, ...(opts.port === undefined ? {} : { port: opts.port }) });
      err(`runwarden daemon listening on ${daemon.url} (pid ${process.pid}, store ${home}); token in ${join(home, 'daemon.token')}`);
      await new Promise<void>((resolve) => {
        let stopping = false;
        const onSignal = (signal: NodeJS.Signals): void => {
          if (stopping) {
            err(`second ${signal}: exiting now`);
            process.exit(signal === 'SIGTERM' ? EXIT.terminated : EXIT.interrupted);
          }
          stopping = true;
          err(`${signal}: stopping — interrupting runs (they continue on the next start), releasing leases (${signal} again to exit at once)`);
          void daemon.stop().then(resolve, resolve);
        };
        process.on('SIGINT', onSignal);
        process.on('SIGTERM', onSignal);
        process.on('SIGHUP', () => undefined);
      });
      err('daemon stopped');
      process.exitCode = EXIT.ok;
    });

  program
    .command('status')
    .description('whether a daemon runs for this store, and what it holds (exit 1 when none runs)')
    .option('--json', 'machine-readable output')
    .action(async (opts: { json?: boolean }, cmd: Command) => {
      const home = resolveHome(globals(cmd).home);
      const daemons = await findDaemons(home);
      let token: string | undefined;
      try {
        token = readFileSync(join(home, 'daemon.token'), 'utf8').trim();
      } catch {
        token = undefined;
      }
      const reports = await Promise.all(
        daemons.map(async (d) => {
          if (token === undefined) return { daemon: d, error: 'no daemon.token in the store' } as const;
          try {
            return { daemon: d, health: await new DaemonClient({ url: d.url, token }).health() } as const;
          } catch (e) {
            return { daemon: d, error: (e as Error).message } as const;
          }
        }),
      );
      if (opts.json === true) out(JSON.stringify({ running: daemons.length > 0, home, daemons: reports.map((r) => ('health' in r ? r.health : { pid: r.daemon.pid, url: r.daemon.url, error: r.error })) }, null, 2));
      else if (daemons.length === 0) out(`no daemon is running for store ${home}; start one with: runwarden serve --detach`);
      else {
        for (const r of reports) {
          const h = 'health' in r ? r.health : undefined;
          if (h === undefined) {
            out(`daemon pid ${r.daemon.pid} at ${r.daemon.url}: not answering (${'error' in r ? r.error : 'no answer'})`);
            continue;
          }
          out(`daemon pid ${h.pid} at ${h.url} · up ${formatMs(h.uptimeMs)} · store ${h.home}`);
          out(`  driving ${h.driving.length} run(s) · executions ${h.executions.running} running, ${h.executions.queued} queued · workers ${h.workers.process} process, ${h.workers.thread} thread`);
          out(`  deliveries ${h.deliveries.pending} pending, ${h.deliveries.inflight} in flight, ${h.deliveries.dead} dead`);
          for (const n of h.needsSecrets) out(`  ${n.runId}: needs_secrets — ${n.message}`);
        }
      }
      process.exitCode = daemons.length > 0 ? EXIT.ok : EXIT.failed;
    });

  program
    .command('stop')
    .description("stop this store's daemons (SIGTERM: runs are interrupted and continue on the next start)")
    .option('--timeout <ms>', 'how long to wait for them to exit (default 60000)', positiveInt)
    .action(async (opts: { timeout?: number }, cmd: Command) => {
      const home = resolveHome(globals(cmd).home);
      const daemons = await findDaemons(home);
      if (daemons.length === 0) {
        out(`no daemon is running for store ${home}`);
        return;
      }
      for (const d of daemons) process.kill(d.pid, 'SIGTERM');
      const deadline = Date.now() + (opts.timeout ?? 60_000);
      while (daemons.some((d) => pidAlive(d.pid)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      const left = daemons.filter((d) => pidAlive(d.pid));
      if (left.length > 0) throw new RunwardenError('DAEMON_UNAVAILABLE', `daemon(s) ${left.map((d) => d.pid).join(', ')} did not exit within ${opts.timeout ?? 60_000} ms`);
      out(`stopped ${daemons.map((d) => `pid ${d.pid}`).join(', ')}`);
    });

  const deliveries = program
    .command('deliveries')
    .description('delivery obligations waiting to be sent, and dead letters (retry them with: deliveries retry)')
    .addOption(new Option('--dead', 'dead letters only').conflicts('pending'))
    .option('--pending', 'pending only')
    .option('--json', 'machine-readable output')
    .action(async (opts: { dead?: boolean; pending?: boolean; json?: boolean }, cmd: Command) => {
      const status = opts.dead === true ? 'dead' : opts.pending === true ? 'pending' : 'all';
      await withClient(globals(cmd), async (client) => {
        const listed = await client.deliveries(status);
        if (opts.json === true) {
          out(JSON.stringify(listed, null, 2));
          return;
        }
        const rows = (status: string, list: Obligation[]): string[][] =>
          list.map((o) => [o.id, o.kind, status, String(o.attempts), status === 'dead' ? (o.deadAt ?? '') : o.nextAt, (o.lastError ?? '').slice(0, 120)]);
        const all = [...rows('pending', listed.pending), ...rows('dead', listed.dead)];
        out(all.length === 0 ? 'no deliveries pending or dead' : table(['DELIVERY', 'KIND', 'STATUS', 'ATTEMPTS', 'NEXT / DEAD AT', 'LAST ERROR'], all));
      });
    });
  deliveries
    .command('retry')
    .description('send dead letters again (attempts start over)')
    .argument('[ids...]', 'delivery ids (see: runwarden deliveries --dead)')
    .option('--all', 'every dead letter')
    .option('--json', 'machine-readable output')
    .action(async (ids: string[], opts: { all?: boolean; json?: boolean }, cmd: Command) => {
      if ((ids.length === 0) === (opts.all !== true)) throw new RunwardenError('OPTION_INVALID', 'give the delivery ids to retry (see: runwarden deliveries --dead), or --all', { field: 'ids' });
      await withClient(globals(cmd), async (client) => {
        const { retried } = await client.retryDeliveries(opts.all === true ? 'all' : ids);
        const missing = ids.filter((id) => !retried.includes(id));
        if (opts.json === true) out(JSON.stringify({ retried, missing }));
        else out(retried.length === 0 ? 'no dead letters to retry' : `retrying ${retried.join(', ')}`);
        if (missing.length > 0) {
          err(`not dead letters: ${missing.join(', ')}`);
          process.exitCode = EXIT.usage;
        }
      });
    });
}

/** Start `serve` detached and wait until it has published its daemon file and answers. */
async function detach(home: string, port: number | undefined): Promise<void> {
  // Bad configuration is reported here, with its field, before anything starts.
  compileHostOptions({ home, ...(port === undefined ? {} : { port }) });
  mkdirSync(join(home, 'logs'), { recursive: true });
  const logPath = join(home, 'logs', 'daemon.out');
  const log = openSync(logPath, 'a');
  const logStart = fstatSync(log).size;
  const args = [BIN, 'serve', ...(port === undefined ? [] : ['--port', String(port)])];
  const child = spawn(process.execPath, args, { detached: true, stdio: ['ignore', log, log], env: { ...process.env, RUNWARDEN_HOME: home } });
  child.unref();
  let exited: number | null | undefined;
  child.once('exit', (code) => {
    exited = code;
  });
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (exited !== undefined) {
      const tail = readFileSync(logPath).subarray(logStart).toString('utf8').trim().split('\n').slice(-8).join('\n');
      throw new RunwardenError('DAEMON_UNAVAILABLE', `the daemon exited (code ${exited}) before answering:\n${tail}`);
    }
    const mine = (await findDaemons(home)).find((d) => d.pid === child.pid);
    if (mine !== undefined) {
      out(`daemon started: pid ${mine.pid} at ${mine.url} (store ${home}; log ${join(home, 'logs', 'runwarden.log')})`);
      return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new RunwardenError('DAEMON_UNAVAILABLE', `the daemon (pid ${child.pid}) did not answer within 30 s; see ${logPath}`);
}
