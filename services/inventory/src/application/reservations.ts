import { causedBy } from '@idem/contracts';
import { advanceAggregateVersion } from '@idem/inbox';
import { enqueue } from '@idem/outbox';
import type { Tx } from '../db.js';
import { findShortages, quantitiesBySku, RESERVATION_VERSION, type Line } from '../domain/reservation.js';
import { lockStock, releaseReservation, takeStock } from './stock.js';

/** The order event a reservation answers: which order, at which version, and the message that said so. */
export interface OrderEvent {
  readonly messageId: string;
  readonly correlationId: string;
  readonly aggregateId: string;
  readonly aggregateVersion: number;
}

/**
 * Records the order's version as seen by inventory, unless a newer one was: false means the
 * message is stale. A cancel leaves its version here as a tombstone for a late order-placed.
 */
function advanceOrderVersion(tx: Tx, event: OrderEvent, now: Date) {
  return advanceAggregateVersion(tx, {
    scope: 'inventory:order',
    aggregateId: event.aggregateId,
    version: event.aggregateVersion,
    now,
  });
}

/**
 * Reserves every line of a placed order or none, and says which through the outbox, in the
 * caller's transaction. `stale` when the order was cancelled here first: nothing is reserved.
 */
export async function reserveStock(
  tx: Tx,
  event: OrderEvent,
  order: { orderId: string; lines: readonly Line[]; totalCents: number; currency: string; paymentMethod: string },
  at: Date,
): Promise<'reserved' | 'rejected' | 'stale'> {
  if (!(await advanceOrderVersion(tx, event, at))) return 'stale';
  const { orderId } = order;
  const requested = quantitiesBySku(order.lines);
  const available = await lockStock(
    tx,
    requested.map((line) => line.sku),
  );
  const shortages = findShortages(requested, available);
  const answer = { aggregateId: orderId, aggregateVersion: RESERVATION_VERSION, ...causedBy(event) };

  if (shortages.length > 0) {
    await tx.reservation.create({ data: { orderId, status: 'rejected', lines: requested, createdAt: at } });
    await enqueue(tx, { ...answer, type: 'inventory.stock-rejected.v1', body: { orderId, shortages } }, at);
    return 'rejected';
  }
  await takeStock(tx, requested, at);
  await tx.reservation.create({ data: { orderId, status: 'reserved', lines: requested, createdAt: at } });
  const payment = { amountCents: order.totalCents, currency: order.currency, method: order.paymentMethod };
  await enqueue(
    tx,
    { ...answer, type: 'inventory.stock-reserved.v1', body: { orderId, lines: requested, payment } },
    at,
  );
  return 'reserved';
}

/**
 * Releases a cancelled order's stock once. A cancel that arrives before its order-placed still
 * records the order's version, so the late order-placed is stale; `stale` here means a newer
 * version of the order was applied already.
 */
export async function cancelReservation(
  tx: Tx,
  event: OrderEvent,
  orderId: string,
  at: Date,
): Promise<'released' | 'stale'> {
  if (!(await advanceOrderVersion(tx, event, at))) return 'stale';
  await releaseReservation(tx, orderId, at);
  return 'released';
}
