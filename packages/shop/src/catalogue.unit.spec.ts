import { randomUUID } from 'node:crypto';
import { parseEnvelope } from '@idem/contracts';
import { describe, expect, it } from 'vitest';
import { consumers, shop, subscribersOf, type EventType } from './catalogue.js';
import { exampleBodies } from './examples.js';

describe("the shop's catalogue", () => {
  it('names every consumer after its service and contract, and maps it back to its contract', () => {
    expect(subscribersOf('orders.order-placed.v1')).toEqual([
      'inventory.order-placed.v1',
      'notifications.order-placed.v1',
    ]);
    expect(consumers['payments.stock-reserved.v1']).toEqual(['inventory.stock-reserved.v1']);
    expect(Object.keys(consumers)).toHaveLength(15);
  });

  it('lets a consumer subscribe to several versions of one contract only, under one name', () => {
    expect(consumers['inventory.order-cancelled.v1']).toEqual([
      'orders.order-cancelled.v1',
      'orders.order-cancelled.v2',
    ]);
    const unversioned = (type: string) => type.replace(/\.v\d+$/, '');
    for (const [name, contracts] of Object.entries(consumers))
      expect(new Set(contracts.map(unversioned)), name).toEqual(new Set([unversioned(contracts[0]!)]));
  });

  it('holds a valid example body of every contract', async () => {
    for (const type of Object.keys(shop.contracts) as EventType[]) {
      const envelope = {
        messageId: randomUUID(),
        type,
        producer: shop.contracts[type].producer,
        occurredAt: '2026-11-30T10:00:00.000Z',
        correlationId: randomUUID(),
        causationId: null,
        aggregateId: 'o-1',
        aggregateVersion: 1,
        body: exampleBodies[type],
      };
      expect((await parseEnvelope(shop, envelope, type)).ok, type).toBe(true);
    }
  });
});
