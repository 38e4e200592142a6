import { defineConfig } from 'vitest/config';

const shared = {
  resolve: { conditions: ['development'] },
  ssr: { resolve: { conditions: ['development'] } },
};
// Projects do not inherit the root's test options: each states its own.
const timeouts = { testTimeout: 60_000, hookTimeout: 60_000 };

/** Where the specs of the unit and integration tiers live. */
const specDirs = [
  'packages/*/src/**/',
  'packages/*/test/**/',
  'services/*/src/**/',
  'infra/*/src/**/',
  'infra/',
  'deploy/*/',
];
// PostgreSQL and Redis must answer before a tier that uses them starts (the unit tier uses neither).
const needsServers = ['./vitest.global-setup.ts'];

// The tiers: `pnpm test:unit` (no servers, seconds), `test:int`, `test:e2e`; `pnpm test` runs all three.
export default defineConfig({
  ...shared,
  test: {
    ...timeouts,
    projects: [
      {
        ...shared,
        test: {
          ...timeouts,
          name: 'unit',
          include: specDirs.map((dir) => `${dir}*.unit.spec.ts`),
          sequence: { groupOrder: 0 },
        },
      },
      {
        ...shared,
        test: {
          ...timeouts,
          name: 'int',
          globalSetup: needsServers,
          include: specDirs.map((dir) => `${dir}*.int.spec.ts`),
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
          globalSetup: needsServers,
          include: ['e2e/**/*.e2e.spec.ts'],
          fileParallelism: false,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
