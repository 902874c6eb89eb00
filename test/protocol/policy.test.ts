import { describe, expect, it } from 'vitest';
import { mergeBudgets, firstBreach } from '../../src/protocol/budget.js';
import { DEFAULT_ENV_ALLOW, OPEN_CEILING, effectivePolicy, envCovered, narrow, pathCovered, policyProblems, type EffectivePolicy } from '../../src/protocol/policy.js';

const same = (a: string, b: string): boolean => a === b;

describe('policy', () => {
  it('matches env names, prefixes and *', () => {
    expect(envCovered(['PATH'], 'PATH')).toBe(true);
    expect(envCovered(['AWS_*'], 'AWS_KEY')).toBe(true);
    expect(envCovered(['AWS_*'], 'AWS_SUB_*')).toBe(true);
    expect(envCovered(['AWS_*'], 'AZURE')).toBe(false);
    expect(envCovered(['AWS_*'], '*')).toBe(false);
    expect(envCovered(['*'], '*')).toBe(true);
  });

  it('covers paths within roots only, without prefix leaks', () => {
    expect(pathCovered(['/work'], '/work/a/b')).toBe(true);
    expect(pathCovered(['/work'], '/work')).toBe(true);
    expect(pathCovered(['/work'], '/workshop')).toBe(false);
    expect(pathCovered(['/work'], '/etc')).toBe(false);
    expect(pathCovered(['/'], '/anything')).toBe(true);
  });

  it('defaults env to a short allow-list within the ceiling, and narrows level by level', () => {
    expect(effectivePolicy(OPEN_CEILING, undefined, undefined)).toEqual({ env: { allow: [...DEFAULT_ENV_ALLOW], set: {} }, fs: { read: ['/'], write: ['/'] }, commands: ['*'], childProcesses: false });
    const ceiling: EffectivePolicy = narrow(OPEN_CEILING, { env: { allow: ['PATH', 'CI_*'], set: { PROXY: 'p' } }, commands: ['git', 'sh'] });
    expect(effectivePolicy(ceiling, undefined, undefined).env).toEqual({ allow: ['PATH'], set: { PROXY: 'p' } });
    expect(effectivePolicy(ceiling, { env: { allow: ['CI_TOKEN'] } }, { commands: ['git'] })).toMatchObject({ env: { allow: ['CI_TOKEN'] }, commands: ['git'] });
  });

  it('reports every field that asks for more than the bound allows', () => {
    const bound = narrow(OPEN_CEILING, { env: { allow: ['PATH'] }, fs: { read: ['/repo'], write: ['/repo/out'] }, commands: ['git'], childProcesses: false });
    const issues = policyProblems({ env: { allow: ['PATH', 'SECRET'], set: { TOKEN: 'x' } }, fs: { read: ['/repo/src'], write: ['/tmp'] }, commands: ['git', 'curl'], childProcesses: true }, bound, 'policy', same);
    expect(issues.map((i) => i.path)).toEqual(['policy.env.allow[1]', 'policy.env.set.TOKEN', 'policy.fs.write[0]', 'policy.commands[1]', 'policy.childProcesses']);
    expect(policyProblems({ env: { allow: ['PATH'] }, fs: { write: ['/repo/out/x'] }, commands: ['git'] }, bound, 'policy', same)).toEqual([]);
  });
});

describe('budgets', () => {
  it('merge field by field, the most specific level first', () => {
    expect(mergeBudgets({ cpuMs: 5 }, { cpuMs: 9, wallMs: 100 }, { rssMb: 64, wallMs: 1 })).toEqual({ cpuMs: 5, wallMs: 100, rssMb: 64 });
  });

  it('report the first limit exceeded', () => {
    const measured = { wallMs: 10, cpuMs: 600, rssMb: 100, tokens: 0, costUsd: 0.5 };
    expect(firstBreach({ cpuMs: 500, costUsd: 0.4 }, measured)).toEqual({ limit: 'cpuMs', limitValue: 500, measured: 600 });
    expect(firstBreach({ cpuMs: 700 }, measured)).toBeUndefined();
  });
});
