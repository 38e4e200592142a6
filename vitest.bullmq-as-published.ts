// The tier `bullmq-as-published`: the messaging package's tests, the composition's and the
// conformance suite on BullMQ as the registry publishes it, without patches/bullmq@<version>.patch
// (which every other tier runs on). A user installing the packages gets that BullMQ; the patch only
// saves round trips, and these tests hold that it changes nothing else.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

/** The BullMQ version the messaging package depends on. */
export const bullmqVersion = (
  JSON.parse(readFileSync(new URL('./packages/messaging/package.json', import.meta.url), 'utf8')) as {
    dependencies: Record<string, string>;
  }
).dependencies.bullmq!;

/** Where that version is installed as published, its own dependencies beside it. */
export const publishedBullmqDir = join(
  process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'),
  'idem',
  `bullmq-${bullmqVersion}`,
);
export const publishedBullmq = join(publishedBullmqDir, 'node_modules', 'bullmq');

/** Installs it from the npm registry once per machine (a few seconds), as .ci/run installs Node itself. */
export function installPublishedBullmq(): void {
  if (existsSync(join(publishedBullmq, 'package.json'))) return;
  execFileSync(
    'npm',
    [
      'install',
      '--silent',
      '--no-save',
      '--no-package-lock',
      '--prefix',
      publishedBullmqDir,
      `bullmq@${bullmqVersion}`,
    ],
    { stdio: 'inherit' },
  );
}
