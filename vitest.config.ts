import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: { conditions: ['development'] },
  ssr: { resolve: { conditions: ['development'] } },
  test: {
    include: [
      'packages/*/src/**/*.spec.ts',
      'packages/*/test/**/*.spec.ts',
      'services/*/src/**/*.spec.ts',
      'infra/*/src/**/*.spec.ts',
      'infra/*.spec.ts',
      'e2e/**/*.spec.ts',
    ],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
