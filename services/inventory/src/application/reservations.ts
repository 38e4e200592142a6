import { randomUUID } from 'node:crypto';
import { causedBy } from '@idem/contracts';
import { sql, type SqlClient } from '@idem/database';
import {
  advanceAggregateVersion,
  aggregateVersionAdvance,
  type AggregateVersion,
  type OneStatementEffect,
} from '@idem/inbox';
import { enqueue, enqueueInOneStatement } from '@idem/outbox';
import { shop } from '@idem/shop';
import type { PrismaClient, Tx } from '../db.js';
import {
  EXPIRY_VERSION,
  findShortages,
  quantitiesBySku,
  RESERVATION_VERSION,
  type Line,
} from '../domain/reservation.js';
import {
  giveBack,
  lockedStock,
  lockReservation,
  lockStock,
  lockStockOfReservations,
  release,
  takeStock,
  takeWrite,
} from './stock.js';

/** The order event a reservation answers: which order, at which version, and the message that said so. */
export interface OrderEvent {
  readonly messageId: string;
  readonly correlationId: string;
  readonly aggregateId: string;
  readonly aggregateVersion: number;
}

/** The order's version as inventory applies it: a cancel leaves its version as a tombstone for a late order-placed. */
const orderVersion = (event: OrderEvent, now: Date): AggregateVersion => ({
  scope: 'inventory:order',
  aggregateId: event.aggregateId,
  version: event.aggregateVersion,
  now,
});

/** Records the order's version as seen by inventory, unless a newer one was: false means the message is stale. */
const advanceOrderVersion = (tx: Tx, event: OrderEvent, now: Date) =>
  advanceAggregateVersion(tx, orderVersion(event, now));

/** A placed order, as inventory reserves it. */
export interface PlacedOrder {
  readonly orderId: string;
  readonly lines: readonly Line[];
  readonly totalCents: number;
  readonly currency: string;
  readonly paymentMethod: string;
}

/**
 * Reserves every line of a placed order or none, and says which through the outbox, in the
 * caller's transaction. `stale` when the order was cancelled here first: nothing is reserved.
 */
export async function reserveStock(
  tx: Tx,
  event: OrderEvent,
  order: PlacedOrder,
  at: Date,
): Promise<'reserved' | 'rejected' | 'stale'> {
  const { orderId } = order;
  const requested = quantitiesBySku(order.lines);
  // The stock first, then the order's version: the one lock order (stock.ts).
  const available = await lockStock(
    tx,
    requested.map((line) => line.sku),
  );
  if (!(await advanceOrderVersion(tx, event, at))) return 'stale';
  const shortages = findShortages(requested, available);
  if (shortages.length > 0) {
    await tx.reservation.create({
      data: { orderId, status: 'rejected', lines: requested, createdAt: at, correlationId: event.correlationId },
    });
    await enqueue(
      tx,
      shop,
      { ...answer(event, orderId), type: 'inventory.stock-rejected.v1', body: { orderId, shortages } },
      at,
    );
    return 'rejected';
  }
  await takeStock(tx, { orderId, correlationId: event.correlationId }, requested, at);
  await enqueue(tx, shop, stockReserved(event, order, requested), at);
  return 'reserved';
}

/**
 * {@link reserveStock}'s common case — stock that covers every line, for an order not cancelled
 * here — as the WITH list of one statement (`reserved` has a row when it reserved): the stock rows
 * locked in SKU order, as `lockStock` takes them, then the order's version, the stock, the
 * reservation and its event, each only if what it needs holds. A shortage or a stale order writes
 * nothing, and the plain way decides the delivery.
 */
export function reserveWrite(db: SqlClient, event: OrderEvent, order: PlacedOrder, at: Date): OneStatementEffect {
  const requested = quantitiesBySku(order.lines);
  const reserved = enqueueInOneStatement(
    db,
    shop,
    stockReserved(event, order, requested),
    at,
    sql`EXISTS (SELECT 1 FROM reserved)`,
  );
  const covered = sql`
    (SELECT count(*) FROM locked
       JOIN unnest(${requested.map((l) => l.sku)}::text[], ${requested.map((l) => l.quantity)}::int[]) AS line(sku, quantity)
      USING (sku)
      WHERE locked.available >= line.quantity) = ${requested.length}::int`;
  // The stock rows are locked before the order's version, as every path locks them (stock.ts). A
  // FOR UPDATE here returns each row as the last commit left it, so `covered` reads the stock the
  // write will take from (inventory.int.spec.ts "serialises a reservation in one statement…" holds
  // both interleavings).
  return {
    with: sql`
      locked AS MATERIALIZED (${lockedStock(requested.map((line) => line.sku))}),
      advanced AS (${aggregateVersionAdvance(orderVersion(event, at), covered)}),
      ${takeWrite({ orderId: order.orderId, correlationId: event.correlationId }, requested, at, sql`EXISTS (SELECT 1 FROM advanced)`)},
      event AS (${reserved.insert})`,
    wrote: 'reserved',
    afterCommit: reserved.afterCommit,
  };
}

/** The head of inventory's answer about an order's reservation (stock-reserved or stock-rejected). */
const answer = (event: OrderEvent, orderId: string) => ({
  aggregateId: orderId,
  aggregateVersion: RESERVATION_VERSION,
  ...causedBy(event),
});

const stockReserved = (event: OrderEvent, order: PlacedOrder, requested: Line[]) => ({
  ...answer(event, order.orderId),
  type: 'inventory.stock-reserved.v1' as const,
  body: {
    orderId: order.orderId,
    lines: requested,
    payment: { amountCents: order.totalCents, currency: order.currency, method: order.paymentMethod },
  },
});

/**
 * Releases a cancelled order's stock once. A cancel that arrives before its order-placed still
 * records the order's version, so the late order-placed is stale; `stale` here means a newer
 * version of the order was applied already. Its stock and its reservation are locked before its
 * version (the one lock order, stock.ts); a reservation of the order committed while the cancel
 * waited on the version is read, locked and released after it.
 */
export async function cancelReservation(
  tx: Tx,
  event: OrderEvent,
  orderId: string,
  at: Date,
): Promise<'released' | 'stale'> {
  await lockStockOfReservations(tx, [orderId]);
  let reservation = await lockReservation(tx, orderId);
  if (!(await advanceOrderVersion(tx, event, at))) return 'stale';
  if (!reservation) {
    await lockStockOfReservations(tx, [orderId]);
    reservation = await lockReservation(tx, orderId);
  }
  await release(tx, orderId, reservation, at);
  return 'released';
}

/**
 * No reservation outlives a bound: reservations still holding stock `ttlMs` after they were made
 * (their payment never completed: a provider that keeps failing, an attempt parked for an
 * operator) give their stock back and end `expired`, each with `inventory.reservation-expired.v1`
 * in the same transaction, so that orders cancels the order (and payments its payment). Each
 * reservation is locked as the payment's capture and the order's cancellation lock it, so
 * whichever comes second sees the first. Returns how many expired.
 */
export async function expireReservations(
  db: PrismaClient,
  { ttlMs, now, batchSize = 100 }: { ttlMs: number; now: Date; batchSize?: number },
): Promise<number> {
  return db.$transaction(async (tx) => {
    // Read first, then their stock locked in SKU order, then the reservations (the one lock order,
    // stock.ts); SKIP LOCKED leaves one a capture or a cancel holds to the next sweep.
    const candidates = await tx.$queryRaw<{ order_id: string; lines: Line[] }[]>`
      SELECT order_id::text, lines FROM reservations
      WHERE status = 'reserved' AND created_at < ${new Date(now.getTime() - ttlMs)}
      ORDER BY created_at LIMIT ${batchSize}`;
    if (candidates.length === 0) return 0;
    await lockStock(tx, [...new Set(candidates.flatMap((r) => r.lines.map((line) => line.sku)))]);
    const due = await tx.$queryRaw<
      { order_id: string; lines: Line[]; created_at: Date; correlation_id: string | null }[]
    >`
      SELECT order_id::text, lines, created_at, correlation_id::text FROM reservations
      WHERE order_id = ANY(${candidates.map((r) => r.order_id)}::uuid[]) AND status = 'reserved'
      ORDER BY created_at FOR UPDATE SKIP LOCKED`;
    if (due.length === 0) return 0;
    // Every SKU of the batch once, in SKU order (locked already).
    await giveBack(
      tx,
      due.flatMap((reservation) => reservation.lines),
      { held: true },
      now,
    );
    await tx.reservation.updateMany({
      where: { orderId: { in: due.map((reservation) => reservation.order_id) } },
      data: { status: 'expired', releasedAt: now },
    });
    for (const reservation of due) {
      await enqueue(
        tx,
        shop,
        {
          type: 'inventory.reservation-expired.v1',
          aggregateId: reservation.order_id,
          aggregateVersion: EXPIRY_VERSION,
          correlationId: reservation.correlation_id ?? randomUUID(),
          causationId: null,
          body: {
            orderId: reservation.order_id,
            lines: reservation.lines,
            reservedAt: reservation.created_at.toISOString(),
          },
        },
        now,
      );
    }
    return due.length;
  });
}
