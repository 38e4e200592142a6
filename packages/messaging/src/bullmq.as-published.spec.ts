// Run only by the tier `bullmq-as-published` (vitest.config.ts): that tier's BullMQ is the one the
// registry publishes, not this repository's patched copy, or its tests would prove nothing.
import { Worker } from 'bullmq';
import { expect, it } from 'vitest';

it('runs on BullMQ as published: the worker lacks the patch (patches/README.md)', () => {
  // A protected method, read as text: the patch adds a parameter to it and a comment in it.
  const fetched = String((Worker.prototype as unknown as Record<string, unknown>).nextJobFromJobData);
  expect(fetched).toMatch(/nextJobFromJobData\(jobData, jobId, token\)/);
  expect(fetched).not.toContain('Patched (idem)');
});
