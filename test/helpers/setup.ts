// A Node warning during a test run is a failure.
import { afterAll } from 'vitest';

const warnings: string[] = [];
process.on('warning', (w) => warnings.push(`${w.name}: ${w.message}`));

afterAll(() => {
  if (warnings.length > 0) throw new Error(`Node warnings during the suite:\n${warnings.join('\n')}`);
});
