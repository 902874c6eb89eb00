import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Suites start real processes, kill them and time heartbeats: run files one at a time.
    fileParallelism: false,
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
    setupFiles: ['test/helpers/setup.ts'],
    reporters: ['default'],
  },
});
