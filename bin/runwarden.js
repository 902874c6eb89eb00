#!/usr/bin/env node
// The runwarden CLI entry: a thin shim over the compiled CLI in dist/.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const entry = new URL('../dist/cli/main.js', import.meta.url);
if (!existsSync(fileURLToPath(entry))) {
  process.stderr.write('runwarden is not built: run `npm run build` (npm ci does it for you)\n');
  process.exit(1);
}
const { main } = await import(entry.href);
await main(process.argv);
