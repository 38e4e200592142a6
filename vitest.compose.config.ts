import { defineConfig } from 'vitest/config';

/**
 * `pnpm test:compose`: the compose file on a real Docker engine (e2e/*.compose.spec.ts). Its own
 * tier: it needs an engine, builds the images and takes minutes; `.ci/run` runs it after `pnpm test`.
 */
export default defineConfig({
  resolve: { conditions: ['development'] },
  ssr: { resolve: { conditions: ['development'] } },
  test: {
    name: 'compose',
    include: ['e2e/**/*.compose.spec.ts'],
    // The classroom story drives the console in Chromium.
    globalSetup: ['./e2e/global-setup.ts'],
    fileParallelism: false,
    testTimeout: 300_000,
    hookTimeout: 1_500_000,
  },
});
