// The tier `bullmq-as-published`: the messaging package's tests, the composition's and the
// conformance suite on BullMQ as the registry publishes it, without patches/bullmq@<version>.patch
// (which every other tier runs on). A user installing the packages gets that BullMQ; the patch only
// saves round trips, and these tests hold that it changes nothing else.
import { readFileSync } from 'node:fs';
import { fromRegistry } from './scripts/registry-cache.js';

/** The BullMQ version the messaging package's tests pin (its peer range starts there). */
const bullmqVersion = (
  JSON.parse(readFileSync(new URL('./packages/messaging/package.json', import.meta.url), 'utf8')) as {
    devDependencies: Record<string, string>;
  }
).devDependencies.bullmq!;

/** That version as published, installed once per machine: the tier imports it in place of the patched one. */
export const publishedBullmq = (): string => fromRegistry('bullmq', bullmqVersion, `bullmq-${bullmqVersion}`);
