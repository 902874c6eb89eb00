import { describe, expect, it } from 'vitest';
import type { RunEvent } from '../../src/protocol/events.js';
import { RecordFoldError, applyEvents, canTransition, createRecord, replay } from '../../src/protocol/record.js';
import { parseWorkflowSpec } from '../../src/protocol/spec.js';

const spec = parseWorkflowSpec({
  name: 'x',
  nodes: [
    { id: 'a', kind: 'command', cmd: 'true' },
    { id: 'r', kind: 'router', routes: [{ when: { type: 'always' }, to: 'c' }] },
    { id: 'b', kind: 'command', cmd: 'true' },
    { id: 'c', kind: 'command', cmd: 'true' },
  ],
});
const ts = '2026-01-01T00:00:00.000Z';
const created: RunEvent = { seq: 1, ts, type: 'run_created', runId: 'r1', name: 'x', incarnationId: 'i', cwd: '/', depth: 0, nodes: ['a', 'r', 'b', 'c'], first: 'a', secrets: [] };
const seqd = (events: Array<Record<string, unknown>>, from = 2): RunEvent[] => events.map((e, i) => ({ ...e, seq: from + i, ts }) as RunEvent);

describe('the run record fold', () => {
  it('reaches completed only from verifying', () => {
    expect(canTransition('running', 'completed')).toBe(false);
    expect(canTransition('verifying', 'completed')).toBe(true);
    const record = createRecord(spec, created);
    expect(() => applyEvents(record, seqd([{ type: 'run_state', state: 'running' }, { type: 'run_state', state: 'completed', outcome: 'unverified' }]))).toThrow(RecordFoldError);
    expect(record.seq).toBe(1); // applyEvents works on a copy
  });

  it('refuses gaps and duplicates in seq', () => {
    const record = createRecord(spec, created);
    expect(() => applyEvents(record, seqd([{ type: 'run_state', state: 'running' }], 3))).toThrow(/does not follow/);
    expect(() => applyEvents(record, seqd([{ type: 'run_state', state: 'running' }], 1))).toThrow(/does not follow/);
  });

  it('keeps the cursor where routing put it, and marks unvisited nodes skipped at the end', () => {
    const events = [
      created,
      ...seqd([
        { type: 'run_state', state: 'running' },
        { type: 'node_started', node: 'a', attempt: 1, visit: 1, cause: 'visit', executions: ['r1/a/a1'] },
        { type: 'node_succeeded', node: 'a', attempt: 1, durationMs: 5, next: 'r' },
        { type: 'node_routed', node: 'r', visit: 1, to: 'c', route: 0 },
      ]),
    ];
    const mid = replay(spec, events);
    expect(mid.cursor).toBe('c');
    expect(mid.nodes.b!.state).toBe('pending');
    const end = replay(spec, [
      ...events,
      ...seqd(
        [
          { type: 'node_started', node: 'c', attempt: 1, visit: 1, cause: 'visit', executions: ['r1/c/a1'] },
          { type: 'node_succeeded', node: 'c', attempt: 1, durationMs: 5, next: null },
          { type: 'run_state', state: 'verifying' },
          { type: 'run_state', state: 'completed', outcome: 'unverified', reason: 'no contract' },
        ],
        6,
      ),
    ]);
    expect(end.nodes.b!.state).toBe('skipped');
    expect(end.state).toBe('completed');
    expect(end.sideEffectSeq).toBe(2);
  });

  it('refuses an attempt that ends twice', () => {
    const events = [
      created,
      ...seqd([
        { type: 'run_state', state: 'running' },
        { type: 'node_started', node: 'a', attempt: 1, visit: 1, cause: 'visit', executions: ['r1/a/a1'] },
        { type: 'node_succeeded', node: 'a', attempt: 1, durationMs: 5, next: 'r' },
        { type: 'node_failed', node: 'a', attempt: 1, durationMs: 5, error: { code: 'X', message: 'x' } },
      ]),
    ];
    expect(() => replay(spec, events)).toThrow(/already ended/);
  });
});
