import { causedBy } from '@idem/contracts';
import { processed, stale, type MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/messaging';
import { enqueue } from '@idem/outbox';
import type { Tx } from '../db.js';
import { findShortages, quantitiesBySku } from '../domain/reservation.js';
import { advanceOrderVersion } from '../application/order-versions.js';
import { lockStock, takeStock } from '../application/stock.js';

/**
 * inventory.order-placed.v1: reserve every line or none, and say which through the outbox,
 * all in the inbox transaction.
 */
export function handleOrderPlaced({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, MessageOf<'inventory.order-placed.v1'>> {
  return async (message, tx) => {
    const { orderId, lines, totalCents, currency, paymentMethod } = message.body;
    const at = now();
    if (!(await advanceOrderVersion(tx, message, at)))
      return stale(`order ${orderId} was cancelled before it was placed here; nothing is reserved`);

    const requested = quantitiesBySku(lines);
    const available = await lockStock(
      tx,
      requested.map((line) => line.sku),
    );
    const shortages = findShortages(requested, available);
    const event = { aggregateId: orderId, aggregateVersion: 1, ...causedBy(message) };

    if (shortages.length > 0) {
      await tx.reservation.create({ data: { orderId, status: 'rejected', lines: requested, createdAt: at } });
      await enqueue(tx, { ...event, type: 'inventory.stock-rejected.v1', body: { orderId, shortages } }, at);
      return processed;
    }
    await takeStock(tx, requested, at);
    await tx.reservation.create({ data: { orderId, status: 'reserved', lines: requested, createdAt: at } });
    await enqueue(
      tx,
      {
        ...event,
        type: 'inventory.stock-reserved.v1',
        body: { orderId, lines: requested, payment: { amountCents: totalCents, currency, method: paymentMethod } },
      },
      at,
    );
    return processed;
  };
}
