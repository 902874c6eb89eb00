/**
 * `runwarden demo`: a real JavaScript project with two bugs and failing
 * `node --test` tests, in a fresh git repository, repaired by the
 * repair-until-green workflow: an agent turn (a scripted fixer standing in for
 * a coding-agent CLI, one fix per turn), a verifier running the real tests,
 * and routers looping back to the agent while the tests fail and a visit
 * budget remains.
 */
import { mkdtemp, mkdir, readdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { simpleGit } from 'simple-git';
import { RunwardenError } from '../protocol/errors.js';
import type { WorkflowSpecInput } from '../protocol/spec.js';

const FILES: Record<string, string> = {
  'package.json': `${JSON.stringify({ name: 'stats-demo', version: '1.0.0', private: true, type: 'module', scripts: { test: 'node --test' } }, null, 2)}\n`,
  'src/stats.js': `/** The sum of a list of numbers. */
export function sum(values) {
  let total = 1;
  for (const v of values) total += v;
  return total;
}

/** The arithmetic mean of a list of numbers; 0 for an empty list. */
export function mean(values) {
  if (values.length === 0) return 0;
  return sum(values) / (values.length - 1);
}
`,
  'test/stats.test.js': `import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mean, sum } from '../src/stats.js';

test('sum adds numbers', () => {
  assert.equal(sum([1, 2, 3]), 6);
  assert.equal(sum([]), 0);
});

test('mean averages numbers', () => {
  assert.equal(mean([2, 4, 6]), 4);
  assert.equal(mean([]), 0);
});
`,
  '.gitignore': 'node_modules/\n',
};

/** The bundled scripted fixer. */
export function fixerPath(): string {
  return fileURLToPath(new URL('../../assets/demo/fixer.mjs', import.meta.url));
}

/**
 * Create the demo project as a git repository with one commit; returns its path.
 * @throws {RunwardenError} `OPTION_INVALID` when `dir` exists and is not empty: the demo never writes into a project.
 */
export async function createDemoProject(dir?: string): Promise<string> {
  if (dir !== undefined) {
    const entries = await readdir(dir).catch((err: NodeJS.ErrnoException) => (err.code === 'ENOENT' ? [] : Promise.reject(err)));
    if (entries.length > 0) throw new RunwardenError('OPTION_INVALID', `--dir ${dir} is not empty; the demo writes a fresh project, so give it a new or empty directory`, { field: 'dir' });
  }
  const root = dir ?? (await mkdtemp(join(tmpdir(), 'runwarden-demo-')));
  for (const [path, text] of Object.entries(FILES)) {
    await mkdir(join(root, path, '..'), { recursive: true });
    await writeFile(join(root, path), text);
  }
  const git = simpleGit(root);
  await git.init();
  await git.addConfig('user.name', 'runwarden demo').addConfig('user.email', 'demo@runwarden.invalid').addConfig('commit.gpgsign', 'false');
  await git.add('.').commit('A small statistics library (with bugs)');
  return root;
}

/** The repair-until-green workflow for the demo project at `repo`. */
export function demoSpec(repo: string): WorkflowSpecInput {
  return {
    name: 'repair-until-green',
    description: 'Agent fixes, verifier runs the real tests, routers loop while red and a visit budget remains.',
    cwd: repo,
    maxNodeVisits: 10,
    contract: { id: 'unit-tests', checks: [{ type: 'command', id: 'node-test', cmd: process.execPath, args: ['--test'], timeoutMs: 120_000 }] },
    nodes: [
      {
        id: 'fix',
        kind: 'agent',
        engine: 'custom',
        customEngine: { bin: process.execPath, args: [fixerPath()], promptVia: 'stdin' },
        prompt: 'The unit tests of this project fail. Find the bug in src/ and fix it.',
        timeoutMs: 120_000,
      },
      { id: 'verify', kind: 'verifier', contract: 'run', onFailure: 'continue' },
      { id: 'repair-gate', kind: 'router', routes: [{ when: { type: 'node_failed', node: 'verify' }, to: 'repair-budget' }], default: 'summary' },
      { id: 'repair-budget', kind: 'router', routes: [{ when: { type: 'visits_lt', node: 'fix', n: 4 }, to: 'fix' }], default: 'summary' },
      { id: 'summary', kind: 'command', cmd: 'git', args: ['diff', '--stat'] },
    ],
  };
}
