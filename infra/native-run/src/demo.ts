// `pnpm demo`: against a running system (pnpm start), tells four stories and how each ended.
import { runStories } from './stories.js';

const offset = Number(process.env.IDEM_PORT_OFFSET ?? 0);
const url = (port: number) => `http://127.0.0.1:${port + offset}`;
const urls = { orders: url(3001), inventory: url(3002), payments: url(3003), notifications: url(3004) };

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
