import { defineConfig } from 'vitest/config';

const shared = {
  resolve: { conditions: ['development'] },
  ssr: { resolve: { conditions: ['development'] } },
};
// Projects do not inherit the root's test options: each states its own.
const timeouts = { testTimeout: 60_000, hookTimeout: 60_000 };

export default defineConfig({
  ...shared,
  test: {
    globalSetup: ['./vitest.global-setup.ts'],
    ...timeouts,
    projects: [
      {
        ...shared,
        test: {
          ...timeouts,
          name: 'unit+int',
          include: [
            'packages/*/src/**/*.spec.ts',
            'packages/*/test/**/*.spec.ts',
            'services/*/src/**/*.spec.ts',
            'infra/*/src/**/*.spec.ts',
            'infra/*.spec.ts',
            'deploy/*/*.spec.ts',
          ],
          sequence: { groupOrder: 0 },
        },
      },
      {
        ...shared,
        // Each e2e file runs a whole system (a dozen processes and their connection pools):
        // they run after the other tiers, one file at a time, so two never share the 2 cores
        // and PostgreSQL's connection limit.
        test: {
          ...timeouts,
          name: 'e2e',
          include: ['e2e/**/*.e2e.spec.ts'],
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
