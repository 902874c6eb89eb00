#!/usr/bin/env node
// A scripted "coding agent" for `runwarden demo`: it stands in for a real
// agent CLI. It reads its prompt on stdin, fixes the first bug it knows of in
// src/stats.js (one per turn), and says what it did on stdout.
import { readFileSync, writeFileSync } from 'node:fs';

const prompt = readFileSync(0, 'utf8');
const file = 'src/stats.js';
const fixes = [
  { bug: 'let total = 1;', fix: 'let total = 0;', what: 'sum() started counting at 1; it now starts at 0' },
  { bug: 'values.length - 1', fix: 'values.length', what: 'mean() divided by one less than the count; it now divides by the count' },
];
const source = readFileSync(file, 'utf8');
const next = fixes.find((f) => source.includes(f.bug));
if (next === undefined) {
  console.log('I looked at src/stats.js and found nothing left to fix.');
} else {
  writeFileSync(file, source.replace(next.bug, next.fix));
  console.log(`Fixed ${file}: ${next.what}.`);
}
const steer = prompt.split('\n\n')[0];
if (prompt.includes('\n\n') && steer.trim() !== '') console.log(`(I was told: ${steer.trim().slice(0, 200)})`);
