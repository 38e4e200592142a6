// `pnpm demo`: against a running system (pnpm start), tells four stories and how each ended.
import { runStories } from './stories.js';
import { systemFromEnv } from './system.js';

const { urls } = systemFromEnv();

try {
  const results = await runStories(urls);
  console.table(
    results.map((r) => ({
      story: r.story,
      order: r.orderId.slice(0, 8),
      expected: r.expected,
      status: r.status,
      payment: r.payment,
      'emails sent': r.emails.join(', '),
      '': r.ok ? 'ok' : 'UNEXPECTED',
    })),
  );
  process.exit(results.every((r) => r.ok) ? 0 : 1);
} catch (error) {
  console.error(`demo failed: ${(error as Error).message}\nIs the system running? Start it with: pnpm start`);
  process.exit(1);
}
