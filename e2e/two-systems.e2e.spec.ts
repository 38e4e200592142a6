/**
 * "A second system beside the first" (IDEM_PORT_OFFSET) is a second system: its own databases,
 * queue prefix, provider and mail server. Two run side by side and never see each other's messages.
 */
import { randomInt } from 'node:crypto';
import { dropDatabase } from '@idem/database';
import { placeOrder, SERVICES, startSystem, systemFromEnv, waitForStatus, type RunningSystem } from '@idem/native-run';
import { deleteQueues } from '@idem/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkSystem, readRows, stripeOf } from './support.js';
import { listStripe } from '@idem/checker';

const systems: RunningSystem[] = [];

beforeAll(async () => {
  const base = randomInt(8_000, 19_000);
  for (const offset of [base, base + 100]) {
    // As `IDEM_PORT_OFFSET=<offset> pnpm start` would start it.
    const { portOffset, name } = systemFromEnv({ IDEM_PORT_OFFSET: String(offset) });
    systems.push(
      await startSystem({
        portOffset,
        name,
        env: { CONSUMER_CONCURRENCY: '2', DATABASE_POOL_MAX: '3' },
        log: () => {},
      }),
    );
  }
}, 180_000);
afterAll(async () => {
  for (const system of systems) {
    await system.stop();
    await Promise.all(SERVICES.map((s) => dropDatabase(system.databaseUrls[s])));
    await deleteQueues(system.queuePrefix);
  }
});

describe('two systems on one machine', () => {
  it('keep their own databases and queues: each order ends in its own system only', async () => {
    const [first, second] = systems as [RunningSystem, RunningSystem];
    expect(first.queuePrefix).not.toBe(second.queuePrefix);
    const line = [{ sku: 'keyboard', quantity: 1 }];
    const orders = await Promise.all([placeOrder(first.urls, line), placeOrder(second.urls, line)]);
    await Promise.all([
      waitForStatus(first.urls, orders[0].orderId, new Set(['PAID'])),
      waitForStatus(second.urls, orders[1].orderId, new Set(['PAID'])),
    ]);
    for (const [index, system] of systems.entries()) {
      const own = orders[index]!.orderId;
      const rows = await readRows<{ id: string }>(system.databaseUrls.orders, 'SELECT id FROM orders');
      expect(rows.map((r) => r.id)).toEqual([own]);
      for (const service of ['inventory', 'payments', 'notifications'] as const) {
        const seen = await readRows<{ n: string }>(
          system.databaseUrls[service],
          'SELECT count(*)::text AS n FROM processed_messages',
        );
        expect(Number(seen[0]!.n), `${service} of system ${index}`).toBeGreaterThan(0);
      }
      const intents = await listStripe<{ id: string; metadata: { order_id: string } }>(
        stripeOf(system),
        '/v1/payment_intents',
      );
      expect(intents.map((p) => p.metadata.order_id)).toEqual([own]);
      const report = await checkSystem(system);
      expect(report.findings.filter((f) => f.check !== 'crash_window_send')).toEqual([]);
    }
  }, 120_000);
});
