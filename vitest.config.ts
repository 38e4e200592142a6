import { defineConfig } from 'vitest/config';
import { publishedBullmq } from './vitest.bullmq-as-published.js';

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
  'infra/repository/',
  'deploy/*/',
];
// PostgreSQL and Redis must answer before a tier that uses them starts (the unit tier uses neither).
const needsServers = ['./vitest.global-setup.ts'];

/** A tier: a vitest project of its own, selected with `--project <name>`. */
const tier = (name: string, include: string[], options: Record<string, unknown> = {}) => ({
  ...shared,
  test: { ...timeouts, name, include, sequence: { groupOrder: 0 }, ...options },
});

// The tiers: `pnpm test:unit` (no servers, seconds), `test:int`, `bullmq-as-published`, `test:e2e`;
// `pnpm test` runs them all.
export default defineConfig({
  ...shared,
  test: {
    ...timeouts,
    projects: [
      tier(
        'unit',
        specDirs.map((dir) => `${dir}*.unit.spec.ts`),
      ),
      tier(
        'int',
        specDirs.map((dir) => `${dir}*.int.spec.ts`),
        { globalSetup: needsServers },
      ),
      // The packages on BullMQ as published, without this repository's patch: what a user installs.
      {
        ...tier(
          'bullmq-as-published',
          [
            'packages/messaging/src/*.int.spec.ts',
            'packages/service/src/*.int.spec.ts',
            'infra/conformance/src/*.int.spec.ts',
            'packages/messaging/src/bullmq.as-published.spec.ts',
          ],
          {
            // It tests the patch itself: it fails without it, as it should.
            exclude: ['packages/messaging/src/fetch-wakeups.int.spec.ts'],
            globalSetup: needsServers,
          },
        ),
        // Installed here, before any module is loaded (a global setup would come too late).
        resolve: { ...shared.resolve, alias: { bullmq: publishedBullmq() } },
      },
      // Each e2e file runs a whole system (a dozen processes and their connection pools): they
      // run after the other tiers, one file at a time, so two never share the 2 cores and
      // PostgreSQL's connection limit.
      tier('e2e', ['e2e/**/*.e2e.spec.ts'], {
        globalSetup: [...needsServers, './e2e/global-setup.ts'],
        fileParallelism: false,
        sequence: { groupOrder: 1 },
      }),
    ],
  },
});
