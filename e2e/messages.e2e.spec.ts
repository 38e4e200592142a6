/**
 * Messages the services did not expect, put on the broker directly (as another producer, or a
 * broken one, would): out of order, malformed, of an unknown version.
 */
import { randomUUID } from 'node:crypto';
import type { Envelope } from '@idem/shop';
import { createPublisher } from '@idem/messaging';
import { getJson, placeOrder, waitForStatus, type RunningSystem } from '@idem/native-run';
import { redisUrl, waitFor } from '@idem/testkit';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readRows, startIsolatedSystem } from './support.js';
import { shop } from '@idem/shop';

let system: RunningSystem;
beforeAll(async () => {
  system = await startIsolatedSystem();
}, 180_000);
afterAll(() => system?.stop(), 60_000);

/** Inventory's operator: the dead letters below are inventory's. */
const admin = () => ({ authorization: `Bearer ${system.adminTokens.inventory}` });
const envelope = <T extends Envelope['type']>(
  type: T,
  body: Extract<Envelope, { type: T }>['body'],
  aggregateId: string,
  version: number,
) =>
  ({
    messageId: randomUUID(),
    type,
    producer: type.split('.')[0]!,
    occurredAt: new Date().toISOString(),
    correlationId: randomUUID(),
    causationId: null,
    aggregateId,
    aggregateVersion: version,
    body,
  }) as Envelope;

describe('unexpected messages, on the running system', () => {
  it('a cancel processed before its order-placed leaves a tombstone: the late order-placed is stale, no stock reserved', async () => {
    const publisher = createPublisher({ catalogue: shop, prefix: system.queuePrefix });
    try {
      const orderId = randomUUID();
      const cancel = envelope('orders.order-cancelled.v1', { orderId, reason: 'before it was placed' }, orderId, 2);
      await publisher.publish([cancel]);
      await waitFor(
        async () =>
          (
            await readRows(system.databaseUrls.inventory, `SELECT 1 FROM processed_messages WHERE message_id = $1`, [
              cancel.messageId,
            ])
          ).length === 1,
      );
      const before = await getJson<{ available: number }>(`${system.urls.inventory}/stock/mouse`);
      const placed = envelope(
        'orders.order-placed.v1',
        {
          orderId,
          customerEmail: 'late@example.com',
          currency: 'eur',
          paymentMethod: 'pm_card_visa',
          lines: [{ sku: 'mouse', quantity: 2, unitPriceCents: 100 }],
          totalCents: 200,
        },
        orderId,
        1,
      );
      await publisher.publish([placed]);
      await waitFor(
        async () =>
          (
            await readRows(
              system.databaseUrls.inventory,
              `SELECT 1 FROM processed_messages WHERE message_id = $1 AND consumer = 'inventory.order-placed.v1'`,
              [placed.messageId],
            )
          ).length === 1,
      );
      expect(
        await readRows(system.databaseUrls.inventory, `SELECT 1 FROM reservations WHERE order_id = $1`, [orderId]),
      ).toEqual([]);
      expect(await getJson(`${system.urls.inventory}/stock/mouse`)).toEqual(before);
      const metrics = await (await fetch(`${system.urls.inventory}/metrics`)).text();
      expect(metrics).toMatch(
        /idem_deliveries_total\{consumer="inventory\.order-placed\.v1"[^}]*outcome="stale"[^}]*\} 1/,
      );
    } finally {
      await publisher.close();
    }
  }, 60_000);

  it('a poison message is dead-lettered with its reason, the consumer keeps serving, a replay is never recorded as processed', async () => {
    const queue = new Queue('inventory.order-placed.v1', {
      connection: new Redis(redisUrl, { maxRetriesPerRequest: null }),
      prefix: system.queuePrefix,
    });
    try {
      const unknownVersion = {
        ...envelope('orders.order-placed.v1', {} as never, randomUUID(), 1),
        type: 'orders.order-placed.v7',
      };
      await queue.add('garbage', { not: 'an envelope' }, { jobId: 'poison-1', attempts: 3 });
      await queue.add(unknownVersion.type, unknownVersion, { jobId: unknownVersion.messageId, attempts: 3 });

      const { orderId } = await placeOrder(system.urls, [{ sku: 'keyboard', quantity: 1 }]);
      expect((await waitForStatus(system.urls, orderId, new Set(['PAID']))).status).toBe('PAID'); // still serving

      type DeadLetters = { deadLetters: { messageId: string; code: string; reason: string; replayCount: number }[] };
      const list = () =>
        fetch(`${system.urls.inventory}/dead-letters?consumer=inventory.order-placed.v1`, { headers: admin() }).then(
          (r) => r.json() as Promise<DeadLetters>,
        );
      const dead = await waitFor(async () => {
        const { deadLetters } = await list();
        return deadLetters.length === 2 && deadLetters;
      });
      expect(dead.map((d) => [d.messageId, d.code]).sort()).toEqual(
        [
          ['poison-1', 'malformed_envelope'],
          [unknownVersion.messageId, 'unsupported_version'],
        ].sort(),
      );
      expect(dead.every((d) => d.reason.length > 0 && d.reason.length <= 500)).toBe(true);
      expect((await fetch(`${system.urls.inventory}/dead-letters`)).status).toBe(401);

      const replay = await fetch(`${system.urls.inventory}/dead-letters/replay`, {
        method: 'POST',
        headers: { ...admin(), 'content-type': 'application/json' },
        body: JSON.stringify({ consumer: 'inventory.order-placed.v1' }),
      });
      expect(replay.status).toBe(200);
      // Still broken after the replay: dead-lettered again, never recorded as processed.
      await waitFor(async () => (await list()).deadLetters.length === 2);
      expect(
        await readRows(system.databaseUrls.inventory, `SELECT 1 FROM processed_messages WHERE message_id = $1`, [
          unknownVersion.messageId,
        ]),
      ).toEqual([]);
    } finally {
      await queue.close();
    }
  }, 90_000);
});
