#!/usr/bin/env node
// Per-execution overhead of runwarden's worker pools against the bare
// primitives, measured in the same run on the same machine (ratios, because
// shared machines are noisy). Prints medians and ratios.
//
//   (a) a no-op script in a warm thread      vs  a bare piscina run of the same function
//   (b) `true` in the warm process pool      vs  execa('true') from this process
//   (c) a cold process-worker start          vs  a bare child_process.fork round trip
//
// Usage: npm run bench:overhead [-- --quick]
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { Piscina } from 'piscina';
import { silentLogger } from '../dist/host/logger.js';
import { ProcessPool } from '../dist/host/pool/process-pool.js';
import { ThreadPool } from '../dist/host/pool/thread-pool.js';

const quick = process.argv.includes('--quick');
const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const NOOP = here('./fixtures/noop.mjs');
const env = { PATH: process.env.PATH ?? '' };
const limits = { execution: {}, run: {}, runUsed: { wallMs: 0, cpuMs: 0, rssMb: 0, tokens: 0, costUsd: 0 } };
const signal = new AbortController().signal;
const common = { heartbeatMs: 1000, heartbeatTimeoutMs: 10_000, killGraceMs: 2000, sampleMs: 500, logger: silentLogger() };

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function timeEach(n, fn) {
  const times = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await fn(i);
    times.push(performance.now() - t);
  }
  return times;
}

function report(name, ours, bare, unit = 'ms') {
  const a = median(ours);
  const b = median(bare);
  console.log(`${name.padEnd(44)} runwarden ${a.toFixed(3)} ${unit}   bare ${b.toFixed(3)} ${unit}   ratio ${(a / b).toFixed(2)}×`);
  return { name, ours: a, bare: b, ratio: a / b };
}

const results = [];
let seq = 0;
const request = (task, worker) => ({ executionId: `bench/x/a${++seq}`, fence: 1, task, worker, commands: ['*'], limits, timeoutMs: 60_000, signal });

// (a) thread
{
  const n = quick ? 300 : 3000;
  const threads = new ThreadPool({ entry: here('../dist/worker/thread-entry.js'), maxThreads: 1, idleMs: 60_000, ...common });
  const worker = { key: 'bench-thread', env, programEnv: {}, execArgv: [] };
  const task = { kind: 'script', module: NOOP, export: 'default', cwd: process.cwd(), attempt: 1 };
  const bare = new Piscina({ filename: NOOP, minThreads: 1, maxThreads: 1, idleTimeout: 60_000 });
  await timeEach(50, () => threads.execute(request(task, worker)));
  await timeEach(50, () => bare.run(null));
  const ours = await timeEach(n, async () => {
    const outcome = await threads.execute(request(task, worker));
    if (outcome.status !== 'ok') throw new Error(`thread execution: ${outcome.status}`);
  });
  const base = await timeEach(n, () => bare.run(null));
  results.push(report('(a) no-op script, warm thread', ours, base));
  await threads.close();
  await bare.destroy();
}

// (b) process
{
  const n = quick ? 50 : 300;
  const pool = new ProcessPool({ workerEntry: here('../dist/worker/main.js'), idleMs: 60_000, startTimeoutMs: 10_000, recycleAfter: 1_000_000, minWarm: 0, ...common });
  const worker = { key: 'bench-process', env, programEnv: {}, execArgv: [] };
  const task = { kind: 'command', cmd: 'true', args: [], cwd: process.cwd() };
  await timeEach(10, () => pool.execute(request(task, worker)));
  await timeEach(10, () => execa('true'));
  const ours = await timeEach(n, async () => {
    const outcome = await pool.execute(request(task, worker));
    if (outcome.status !== 'ok') throw new Error(`process execution: ${outcome.status}`);
  });
  const base = await timeEach(n, () => execa('true'));
  results.push(report("(b) 'true', warm process pool vs execa", ours, base));
  await pool.close();
}

// (c) cold start
{
  const n = quick ? 5 : 25;
  const ours = await timeEach(n, async () => {
    const pool = new ProcessPool({ workerEntry: here('../dist/worker/main.js'), idleMs: 60_000, startTimeoutMs: 10_000, recycleAfter: 1, minWarm: 0, ...common });
    const outcome = await pool.execute(request({ kind: 'command', cmd: 'true', args: [], cwd: process.cwd() }, { key: 'cold', env, programEnv: {}, execArgv: [] }));
    if (outcome.status !== 'ok') throw new Error(`cold execution: ${outcome.status}`);
    await pool.close();
  });
  const base = await timeEach(n, () => new Promise((resolve, reject) => {
    const child = fork(here('./fixtures/fork-child.mjs'), [], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    child.on('message', (m) => (m.ready ? execa('true').then(() => child.send({})) : undefined));
    child.on('exit', resolve);
    child.on('error', reject);
  }));
  results.push(report('(c) cold worker start + `true` vs bare fork', ours, base));
}

if (process.argv.includes('--json')) console.log(JSON.stringify(results));
