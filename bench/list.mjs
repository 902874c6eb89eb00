#!/usr/bin/env node
// `list` over a large store: the run index against reading every run.json,
// measured in the same run on the same machine (a ratio, because shared
// machines are noisy). Creates the runs through the real store API.
//
//   (a) list with a current index              vs  readdir + read and parse every run.json
//   (b) list after the index file was deleted  (a rebuild: reads every run once)
//
// Usage: npm run bench:list [-- --runs 5000]
import { mkdtempSync, rmSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileRunStore, applyEvents, createRecord, currentOwner, parseWorkflowSpec } from '../dist/index.js';

const arg = process.argv.indexOf('--runs');
const runs = arg > 0 ? Number(process.argv[arg + 1]) : 5000;
const home = mkdtempSync(join(tmpdir(), 'rw-bench-list-'));
const store = new FileRunStore({ home });
const owner = currentOwner('owner-bench');
const spec = parseWorkflowSpec({ name: 'bench', cwd: '/', nodes: [{ id: 'a', kind: 'command', cmd: 'true' }] });

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function timeEach(n, fn) {
  const times = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await fn();
    times.push(performance.now() - t);
  }
  return median(times);
}

const started = performance.now();
for (let i = 0; i < runs; i++) {
  const runId = `bench-${String(i).padStart(6, '0')}`;
  const { guard, record } = await store.create({
    runId,
    spec,
    owner,
    build: (incarnationId) => {
      const first = { seq: 1, ts: new Date().toISOString(), type: 'run_created', runId, name: 'bench', incarnationId, cwd: '/', depth: 0, nodes: ['a'], first: 'a', secrets: [] };
      return { events: [first], record: createRecord(spec, first) };
    },
  });
  const events = [{ seq: 2, ts: new Date().toISOString(), type: 'log', level: 'info', message: 'done' }];
  await store.commit(guard, { events, record: { ...applyEvents(record, events), state: 'completed' } });
  await store.release(guard);
  if (i % 500 === 499) process.stderr.write(`\rcreated ${i + 1}/${runs} runs`);
}
process.stderr.write(`\rcreated ${runs} runs in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);

// The baseline reads with the same parallelism (32 at a time) as list does.
async function readEveryRecord() {
  const names = (await readdir(join(home, 'runs'))).filter((n) => !n.startsWith('.'));
  const out = [];
  let next = 0;
  const lane = async () => {
    while (next < names.length) out.push(JSON.parse(await readFile(join(home, 'runs', names[next++], 'run.json'), 'utf8')).record);
  };
  await Promise.all(Array.from({ length: 32 }, lane));
  return out;
}

await store.list(); // settle the index
const indexed = await timeEach(9, async () => {
  const listed = await store.list();
  if (listed.length !== runs) throw new Error(`listed ${listed.length} of ${runs}`);
});
const bare = await timeEach(9, readEveryRecord);
const rebuild = await timeEach(3, async () => {
  rmSync(join(home, 'index', 'runs.jsonl'), { force: true });
  await store.list();
});
console.log(`list of ${runs} runs, index current            ${indexed.toFixed(1)} ms   read every run.json ${bare.toFixed(1)} ms   ratio ${(indexed / bare).toFixed(2)}×`);
console.log(`list of ${runs} runs, index rebuilt            ${rebuild.toFixed(1)} ms   ratio to reading every run.json ${(rebuild / bare).toFixed(2)}×`);
rmSync(home, { recursive: true, force: true });
