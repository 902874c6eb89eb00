/**
 * One attempt of an executing node (`command`, `agent`, `verifier`,
 * `fanout`): the executions it needs, built as worker tasks and dispatched.
 * The kernel never does node work itself; everything here goes to a worker.
 */
import { setMaxListeners } from 'node:events';
import { resolve } from 'node:path';
import type { DigestScope, Task, TaskOf } from '../../protocol/ipc.js';
import { executionId } from '../../protocol/ids.js';
import type { CustomEngine, FanoutMember, NodeOf, WorkflowSpec } from '../../protocol/spec.js';
import type { ExecutionOutcome } from '../pool/execution.js';
import type { SecretMap } from '../spec-loader.js';
import { fromExecution, sumUsage, type AttemptOutcome } from './attempt-outcome.js';

export type ExecutingNode = NodeOf<'command'> | NodeOf<'agent'> | NodeOf<'verifier'> | NodeOf<'fanout'> | NodeOf<'script'>;

/** Name of the synthesis execution of a fan-out attempt. */
export const SYNTHESIS_MEMBER = '_synthesis';

export interface AttemptContext {
  runId: string;
  spec: WorkflowSpec;
  /** The run's working directory (absolute). */
  cwd: string;
  attempt: number;
  timeoutMs: number;
  /** Steering text to put before agent prompts, if any. */
  steer?: string;
  secrets: SecretMap;
  /** What verdict digests cover: the same for every verdict of the run and for the final re-check. */
  digestScope: DigestScope;
  signal: AbortSignal;
  dispatch(executionId: string, task: Task, timeoutMs: number, signal: AbortSignal): Promise<ExecutionOutcome>;
}

/** The execution ids an attempt of `node` will use (recorded before anything runs). */
export function plannedExecutions(node: ExecutingNode, runId: string, attempt: number): string[] {
  if (node.kind !== 'fanout') return [executionId(runId, node.id, attempt)];
  const ids = node.agents.map((m) => executionId(runId, node.id, attempt, m.name));
  if (node.synthesize) ids.push(executionId(runId, node.id, attempt, SYNTHESIS_MEMBER));
  return ids;
}

/**
 * The digest scope of a run's verdicts: the targets of every `file` check its
 * verifiers run (hashed even when git ignores them), and the store (left out
 * when it sits inside the repository).
 */
export function digestScope(spec: WorkflowSpec, storeHome: string): DigestScope {
  const include: string[] = [];
  for (const node of spec.nodes) {
    if (node.kind !== 'verifier') continue;
    const contract = node.contract === 'run' ? spec.contract : node.contract;
    const cwd = resolve(spec.cwd ?? '.', node.cwd ?? '.');
    for (const check of contract?.checks ?? []) if (check.type === 'file') include.push(resolve(cwd, check.path));
  }
  return { include: [...new Set(include)].sort(), exclude: [storeHome] };
}

/** The default timeout of a verifier: enough for every check to use its own timeout. */
export function verifierTimeoutMs(node: NodeOf<'verifier'>, spec: WorkflowSpec, fallbackMs: number): number {
  const contract = node.contract === 'run' ? spec.contract : node.contract;
  const checks = contract?.checks ?? [];
  const sum = checks.reduce((total, c) => total + (c.type === 'command' ? c.timeoutMs : 1000), 0);
  return Math.max(fallbackMs, sum + 60_000);
}

export async function runNodeAttempt(node: ExecutingNode, ctx: AttemptContext): Promise<AttemptOutcome> {
  const nodeIndex = ctx.spec.nodes.findIndex((n) => n.id === node.id);
  const cwd = resolve(ctx.cwd, 'cwd' in node && node.cwd !== undefined ? node.cwd : '.');
  const one = async (task: Task, member?: string): Promise<AttemptOutcome> =>
    fromExecution(await ctx.dispatch(executionId(ctx.runId, node.id, ctx.attempt, member), task, ctx.timeoutMs, ctx.signal), node.id, ctx.timeoutMs);
  switch (node.kind) {
    case 'command':
      return one({ kind: 'command', cmd: node.cmd, args: node.args, cwd, ...(node.env === undefined ? {} : { env: node.env }) });
    case 'agent':
      return one(agentTask(ctx, node.id, cwd, withSteer(ctx.steer, node.prompt), node, `/nodes/${nodeIndex}/customEngine`));
    case 'verifier': {
      const contract = node.contract === 'run' ? ctx.spec.contract : node.contract;
      return one({ kind: 'verify', cwd, checks: contract?.checks ?? [], scope: ctx.digestScope });
    }
    case 'fanout':
      return runFanout(node, nodeIndex, cwd, ctx);
    case 'script':
      return one({ kind: 'script', module: node.module, export: node.export, ...(node.input === undefined ? {} : { input: node.input }), cwd, attempt: ctx.attempt });
  }
}

function withSteer(steer: string | undefined, prompt: string): string {
  return steer === undefined ? prompt : `${steer}\n\n${prompt}`;
}

function agentTask(
  ctx: AttemptContext,
  nodeId: string,
  cwd: string,
  prompt: string,
  agent: { engine: TaskOf<'agent'>['engine']; model?: string | undefined; customEngine?: CustomEngine | undefined },
  secretRef: string,
  member?: string,
): TaskOf<'agent'> {
  const task: TaskOf<'agent'> = {
    kind: 'agent',
    engine: agent.engine,
    prompt,
    cwd,
    // Sessions are named per attempt, so a stopped attempt's teardown cannot touch its retry's session.
    session: `${ctx.runId}-${nodeId}-a${ctx.attempt}${member === undefined ? '' : `-${member}`}`,
  };
  if (agent.model !== undefined) task.model = agent.model;
  if (agent.customEngine !== undefined) {
    const env = ctx.secrets.get(secretRef);
    task.customEngine = env === undefined ? agent.customEngine : { ...agent.customEngine, env };
  }
  return task;
}

async function runFanout(node: NodeOf<'fanout'>, nodeIndex: number, cwd: string, ctx: AttemptContext): Promise<AttemptOutcome> {
  // A member lost or stopped makes the whole attempt so: stop the siblings rather than wait for them.
  const siblings = new AbortController();
  setMaxListeners(0, siblings.signal);
  const onAbort = (): void => siblings.abort(ctx.signal.reason);
  ctx.signal.addEventListener('abort', onAbort, { once: true });
  const memberCtx = { ...ctx, signal: siblings.signal };
  try {
    const outcomes = await Promise.all(
      node.agents.map(async (member: FanoutMember, j) => {
        const prompt = withSteer(ctx.steer, memberPrompt(member, node.prompt));
        const task = agentTask(memberCtx, node.id, cwd, prompt, member, `/nodes/${nodeIndex}/agents/${j}/customEngine`, member.name);
        const outcome = fromExecution(await ctx.dispatch(executionId(ctx.runId, node.id, ctx.attempt, member.name), task, ctx.timeoutMs, siblings.signal), node.id, ctx.timeoutMs);
        if (outcome.kind === 'lost' || outcome.kind === 'stopped' || outcome.kind === 'preempted') siblings.abort('sibling');
        return { member: member.name, outcome };
      }),
    );
    const usage = sumUsage(outcomes.map((o) => o.outcome.usage));
    const durationMs = Math.max(0, ...outcomes.map((o) => o.outcome.durationMs));
    if (ctx.signal.aborted) return { kind: 'stopped', usage, durationMs };
    const lost = outcomes.find((o) => o.outcome.kind === 'lost');
    if (lost !== undefined && lost.outcome.kind === 'lost') return { ...lost.outcome, usage, durationMs };
    if (outcomes.some((o) => o.outcome.kind === 'preempted')) return { kind: 'preempted', usage, durationMs };
    const failed = outcomes.filter((o) => o.outcome.kind === 'failed');
    const extraOutputs = outcomes.flatMap((o) => (o.outcome.kind === 'ok' ? [{ name: o.member, text: o.outcome.output }] : []));
    if (failed.length > 0) {
      const members = failed.map((f) => f.outcome as Extract<AttemptOutcome, { kind: 'failed' }>);
      // A member that breached the run's budget ends the run, with its own error; one that would fail again makes the node not worth retrying.
      const fatal = members.find((m) => m.failsRun === true);
      if (fatal !== undefined) return { ...fatal, usage, durationMs };
      return {
        kind: 'failed',
        error: {
          code: 'FANOUT_FAILED',
          node: node.id,
          message: `${failed.length} of ${outcomes.length} fan-out members failed: ${failed.map((f) => `${f.member} (${f.outcome.kind === 'failed' ? `${f.outcome.error.code}: ${f.outcome.error.message.slice(0, 300)}` : f.outcome.kind})`).join('; ')}`,
          detail: { members: failed.map((f) => ({ name: f.member, code: f.outcome.kind === 'failed' ? f.outcome.error.code : f.outcome.kind })) },
        },
        usage,
        durationMs,
        output: joinOutputs(extraOutputs),
        retryable: members.every((m) => m.retryable),
      };
    }
    if (!node.synthesize) return { kind: 'ok', output: joinOutputs(extraOutputs), usage, durationMs, extraOutputs };
    const synth = node.synthesizer ?? node.agents[0]!;
    const synthRef = node.synthesizer === undefined ? `/nodes/${nodeIndex}/agents/0/customEngine` : `/nodes/${nodeIndex}/synthesizer/customEngine`;
    const prompt = `${withSteer(ctx.steer, node.prompt)}\n\nThe agents answered:\n\n${joinOutputs(extraOutputs)}\n\nSynthesize their answers into one.`;
    const task = agentTask(ctx, node.id, cwd, prompt, synth, synthRef, SYNTHESIS_MEMBER);
    const synthesis = fromExecution(await ctx.dispatch(executionId(ctx.runId, node.id, ctx.attempt, SYNTHESIS_MEMBER), task, ctx.timeoutMs, ctx.signal), node.id, ctx.timeoutMs);
    const total = sumUsage([usage, synthesis.usage]);
    return synthesis.kind === 'ok' ? { ...synthesis, usage: total, durationMs: durationMs + synthesis.durationMs, extraOutputs } : { ...synthesis, usage: total };
  } finally {
    ctx.signal.removeEventListener('abort', onAbort);
  }
}

function memberPrompt(member: FanoutMember, prompt: string): string {
  const own = member.prompt ?? prompt;
  return member.persona === undefined ? own : `You are ${member.persona}.\n\n${own}`;
}

function joinOutputs(outputs: ReadonlyArray<{ name: string; text: string }>): string {
  return outputs.map((o) => `### ${o.name}\n\n${o.text.trim()}\n`).join('\n');
}
