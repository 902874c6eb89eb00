import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../src/protocol/errors.js';
import { ROOT } from '../helpers/cli.js';

describe('docs/ERRORS.md', () => {
  it('lists every error code, and no code that does not exist', () => {
    const doc = readFileSync(join(ROOT, 'docs/ERRORS.md'), 'utf8');
    const documented = [...doc.matchAll(/^\| `([A-Z_]+)` \|/gm)].map((m) => m[1]);
    expect(documented.sort()).toEqual(Object.keys(ERROR_CODES).sort());
  });
});
