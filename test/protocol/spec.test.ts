import { describe, expect, it } from 'vitest';
import { SpecError } from '../../src/protocol/errors.js';
import { assertRunId, childRunId } from '../../src/protocol/ids.js';
import { IMPLICIT_VERIFIER_ID, compileSpec, followingNode, parseWorkflowSpec } from '../../src/protocol/spec.js';

/** The repair-until-green example of the kernel this project descends from, as written. */
const REFERENCE_EXAMPLE = {
  name: 'solve',
  cwd: '/repo',
  maxNodeVisits: 6,
  contract: { checks: [{ type: 'command', cmd: 'npm', args: ['test'] }] },
  nodes: [
    {
      id: 'triage',
      kind: 'fanout',
      prompt: 'Investigate. Change nothing.',
      agents: [
        { name: 'a', engine: 'claude' },
        { name: 'b', engine: 'codex' },
      ],
      synthesize: true,
    },
    { id: 'implement', kind: 'agent', prompt: 'Fix the failing test', onFailure: 'continue' },
    { id: 'verify', kind: 'verifier', contract: 'run', onFailure: 'continue' },
    { id: 'repair-gate', kind: 'router', routes: [{ when: { type: 'node_failed', node: 'verify' }, to: 'repair-budget' }] },
    { id: 'repair-budget', kind: 'router', routes: [{ when: { type: 'visits_lt', node: 'implement', n: 4 }, to: 'implement' }] },
  ],
};

function issuesOf(input: unknown): Array<{ path: string; message: string }> {
  try {
    parseWorkflowSpec(input);
  } catch (err) {
    expect(err).toBeInstanceOf(SpecError);
    expect((err as SpecError).code).toBe('SPEC_INVALID');
    return [...(err as SpecError).issues];
  }
  throw new Error('expected the spec to be rejected');
}

const node = (extra: Record<string, unknown>) => ({ id: 'a', kind: 'command', cmd: 'true', ...extra });

describe('WorkflowSpec', () => {
  it('accepts the reference repair-until-green example as written, with defaults', () => {
    const spec = parseWorkflowSpec(REFERENCE_EXAMPLE);
    expect(spec.nodes).toHaveLength(5);
    const implement = spec.nodes[1]!;
    expect(implement.kind === 'agent' && implement.engine).toBe('claude');
    const check = spec.contract!.checks[0]!;
    expect(check).toMatchObject({ type: 'command', expectExit: 0, timeoutMs: 600_000, required: true });
    expect(parseWorkflowSpec({ name: 'x', nodes: [node({})] }).maxNodeVisits).toBe(50);
  });

  it('names the field of every problem', () => {
    expect(issuesOf({ name: 'x', nodes: [{ id: 'a', kind: 'bogus' }] })).toEqual([{ path: 'nodes[0].kind', message: expect.stringContaining('unknown node kind') }]);
    expect(issuesOf({ name: 'x', nodes: [node({ colour: 'red' })] })).toEqual([{ path: 'nodes[0].colour', message: 'unknown field' }]);
    expect(issuesOf({ name: 'x', extra: 1, nodes: [node({})] })).toEqual([{ path: 'extra', message: 'unknown field' }]);
    expect(issuesOf({ name: 'x', nodes: [{ id: 'r', kind: 'router', routes: [{ when: { type: 'always' }, to: 'missing' }] }] })[0]).toMatchObject({
      path: 'nodes[0].routes[0].to',
      message: expect.stringContaining("'missing' is not a node"),
    });
    expect(issuesOf({ name: 'x', nodes: [{ id: 'r', kind: 'router', routes: [{ when: 'visits < 3', to: 'r' }] }] })[0]).toMatchObject({
      path: 'nodes[0].routes[0].when',
      message: expect.stringContaining('expressions and strings are not accepted'),
    });
    expect(issuesOf({ name: 'x', nodes: [] })[0]).toMatchObject({ path: 'nodes', message: expect.stringContaining('at least one node') });
    expect(issuesOf({ name: 'x', nodes: [node({}), node({})] })[0]).toMatchObject({ path: 'nodes[1].id', message: expect.stringContaining('duplicate') });
    expect(issuesOf({ name: 'x', nodes: [node({ id: '..' })] })[0]!.path).toBe('nodes[0].id');
    expect(issuesOf({ name: 'x', nodes: [node({ id: '__proto__' })] })[0]).toEqual({ path: 'nodes[0].id', message: "'__proto__' is reserved" });
    expect(issuesOf({ name: 'x', nodes: [node({ next: 'nowhere' })] })[0]!.path).toBe('nodes[0].next');
    expect(issuesOf({ name: 'x', maxNodeVisits: 1e20, nodes: [node({ timeoutMs: -5 })] })).toEqual([
      { path: 'maxNodeVisits', message: expect.stringContaining('<=100000') },
      { path: 'nodes[0].timeoutMs', message: 'must be at least 1 ms' },
    ]);
  });

  it('checks condition shapes, node references and depth', () => {
    const router = (when: unknown) => ({ name: 'x', nodes: [node({}), { id: 'r', kind: 'router', routes: [{ when, to: 'a' }] }] });
    expect(issuesOf(router({ type: 'node_failed', node: 'ghost' }))[0]).toMatchObject({ path: 'nodes[1].routes[0].when.node' });
    expect(issuesOf(router({ type: 'and', all: [{ type: 'always' }, { type: 'visits_lt', node: 'ghost', n: 2 }] }))[0]).toMatchObject({ path: 'nodes[1].routes[0].when.all[1].node' });
    expect(issuesOf(router({ type: 'verified', node: 'a' }))[0]!.message).toContain('needs a verifier or subflow');
    expect(issuesOf(router({ type: 'eval', code: '1' }))[0]!.message).toContain('unknown condition type');
    let deep: unknown = { type: 'always' };
    for (let i = 0; i < 6; i++) deep = { type: 'and', all: [deep] };
    expect(issuesOf(router(deep))[0]!.message).toContain('at most 6 deep');
    let ok: unknown = { type: 'always' };
    for (let i = 0; i < 5; i++) ok = { type: 'and', all: [ok] };
    expect(() => parseWorkflowSpec(router(ok))).not.toThrow();
  });

  it('checks engines, contracts and checks', () => {
    expect(issuesOf({ name: 'x', nodes: [{ id: 'g', kind: 'agent', prompt: 'p', engine: 'custom' }] })[0]!.path).toBe('nodes[0].customEngine');
    expect(issuesOf({ name: 'x', nodes: [{ id: 'v', kind: 'verifier', contract: 'run' }] })[0]!.message).toContain('no top-level contract');
    expect(issuesOf({ name: 'x', nodes: [{ id: 'v', kind: 'verifier', contract: { checks: [{ type: 'file', path: '../etc/passwd' }] } }] })[0]!.path).toBe('nodes[0].contract.checks[0].path');
    expect(issuesOf({ name: 'x', nodes: [{ id: 'v', kind: 'verifier', contract: { checks: [{ type: 'file', path: 'a', matches: '(' }] } }] })[0]!.path).toBe('nodes[0].contract.checks[0].matches');
    expect(issuesOf({ name: 'x', nodes: [{ id: 'v', kind: 'verifier', contract: { checks: [{ type: 'command', cmd: 'true', bogus: 1 }] } }] })[0]!.path).toBe('nodes[0].contract.checks[0].bogus');
    expect(issuesOf({ name: 'x', nodes: [{ id: 's', kind: 'subflow', workflow: { name: 'y', nodes: [{ id: 'q', kind: 'nope' }] } }] })[0]!.path).toBe('nodes[0].workflow.nodes[0].kind');
  });

  it('appends an implicit final verifier only when no verifier runs the contract', () => {
    const compiled = compileSpec(parseWorkflowSpec({ name: 'x', contract: { checks: [{ type: 'command', cmd: 'true' }, { type: 'file', path: 'a' }] }, nodes: [node({})] }));
    expect(compiled.nodes.map((n) => n.id)).toEqual(['a', IMPLICIT_VERIFIER_ID]);
    expect(compiled.contract!.checks.map((c) => c.id)).toEqual(['command-1', 'file-2']);
    expect(compileSpec(compiled)).toEqual(compiled);
    const explicit = compileSpec(parseWorkflowSpec(REFERENCE_EXAMPLE));
    expect(explicit.nodes.map((n) => n.id)).not.toContain(IMPLICIT_VERIFIER_ID);
  });

  it('follows next, then array order, then the end', () => {
    const spec = parseWorkflowSpec({ name: 'x', nodes: [node({ id: 'a', next: 'c' }), node({ id: 'b' }), node({ id: 'c' })] });
    expect(followingNode(spec, 'a')).toBe('c');
    expect(followingNode(spec, 'b')).toBe('c');
    expect(followingNode(spec, 'c')).toBeNull();
  });
});

describe('run ids', () => {
  it('refuses path tricks and bounds the length', () => {
    for (const bad of ['../x', 'a/b', '..', '', '.hidden', 'a\\b', 'x'.repeat(129), 'a..b', 'trailing.', 'ünïcode']) {
      expect(() => assertRunId(bad), bad).toThrowError(expect.objectContaining({ code: 'RUN_ID_INVALID' }));
    }
    expect(() => assertRunId('run-abc_1.2')).not.toThrow();
  });

  it('derives child run ids that stay valid', () => {
    const long = childRunId('p'.repeat(120), 'node', 3, () => 'f'.repeat(64));
    expect(long.length).toBeLessThanOrEqual(128);
    expect(() => assertRunId(long)).not.toThrow();
    expect(childRunId('parent', 'sub', 2, () => '')).toBe('parent.sub.a2');
  });
});
