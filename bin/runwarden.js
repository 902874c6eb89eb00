#!/usr/bin/env node
// The runwarden CLI entry: a thin shim over the compiled CLI in dist/.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const entry = new URL('../dist/cli/main.js', import.meta.url);
if (!existsSync(fileURLToPath(entry))) {
  process.stderr.write('runwarden is not built: run `npm run build` (npm ci does it for you)\n');
  process.exit(1);
}
// A command whose work never settles must not look like a success when the process runs out of work.
let finished = false;
process.on('exit', (code) => {
  if (!finished && code === 0) {
    process.stderr.write('runwarden: internal error: the command stopped before it finished\n');
    process.exitCode = 1;
  }
});
const { main } = await import(entry.href);
await main(process.argv);
finished = true;
