/** Commands that act on runs: cancel, steer, approve, delete — and the hidden background host. */
import type { Command } from 'commander';
import { RunwardenError } from '../../protocol/errors.js';
import { TERMINAL_STATES } from '../../protocol/events.js';
import { backgroundHostMain } from '../background.js';
import { withClient } from '../client.js';
import { err, globals, out } from '../io.js';

export function registerControlCommands(program: Command): void {
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
    await withClient(globals(cmd), async (client) => {
      const receipt = await client.control(runId, action, text === undefined ? {} : { text });
      if (json) out(JSON.stringify(receipt));
      else if (receipt.status === 'applied') out(`${action} applied to run ${runId}${receipt.by !== undefined ? ` by ${receipt.by}` : ''}`);
      else if (receipt.status === 'queued') out(`${action} queued for run ${runId}${receipt.by !== undefined ? `; held by ${receipt.by}, which applies it at its next check` : ''}`);
      if (receipt.status === 'refused') {
        throw new RunwardenError('CONTROL_REFUSED', `${action} refused by run ${runId}: ${receipt.reason ?? 'no reason given'}`);
      }
      const run = await client.show(runId);
      if (receipt.status === 'applied' && action !== 'cancel' && run.owner?.live !== true && !TERMINAL_STATES.has(run.record.state) && !json) {
        err(`no process holds run ${runId}; it takes effect when the run continues: runwarden resume ${runId}`);
      }
    });
  }

  program
    .command('delete')
    .description('delete a run (and its subflow child runs); its id may then be reused')
    .argument('<runId>')
    .option('--json', 'machine-readable output')
    .action(async (runId: string, opts: { json?: boolean }, cmd: Command) => {
      await withClient(globals(cmd), async (client) => {
        const deleted = await client.delete(runId);
        out(opts.json === true ? JSON.stringify({ deleted }) : `deleted ${deleted.join(', ')}`);
      });
    });

  program.command('background-host', { hidden: true }).action(async () => {
    await backgroundHostMain();
  });
}
