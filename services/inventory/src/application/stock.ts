import { query, sql, type Sql } from '@idem/database';
import type { PrismaClient, Tx } from '../db.js';
import { quantitiesBySku, type Line } from '../domain/reservation.js';

/**
 * The one order in which inventory locks: **the stock rows, in SKU order; then a reservation;
 * then the order's version** (a new reservation row is written last). Every path takes them so —
 * a reservation (one statement or plain), a cancellation, a capture, a failed payment, the
 * expiry sweep — and a group-committed batch locks the stock of all its messages first
 * (`lockFirst` on each handler), so no two transactions wait for each other in a cycle. A path
 * that learns its SKUs from a reservation reads it first without a lock (its lines never change).
 * inventory.int.spec.ts "one lock order" holds each pair both ways.
 *
 * Locks the stock rows of `skus` in SKU order and returns what is available. Concurrent
 * orders for the same SKU queue up on these locks (so the last unit goes to exactly one of
 * them), and the fixed order rules out deadlocks between orders sharing several SKUs.
 */
export async function lockStock(tx: Tx, skus: readonly string[]): Promise<Map<string, number>> {
  const rows = await query<{ sku: string; available: number }>(tx, lockedStock(skus));
  return new Map(rows.map((row) => [row.sku, row.available]));
}

/** {@link lockStock}'s query, for a statement's WITH list. */
export const lockedStock = (skus: readonly string[]): Sql =>
  sql`SELECT sku, available FROM stock_items WHERE sku = ANY(${skus}::text[]) ORDER BY sku FOR UPDATE`;

/** Locks, in SKU order, the stock rows the reservations of `orderIds` hold or sold (none for an order with none). */
export async function lockStockOfReservations(tx: Tx, orderIds: readonly string[]): Promise<void> {
  await query(tx, sql`${stockOfReservations(sql`order_id = ANY(${orderIds}::uuid[])`)} ORDER BY sku FOR UPDATE`);
}

/** What a batch of messages about orders' reservations locks first (`LocksFirst`): their stock. */
export const reservationsStockFirst = {
  lockFirst: (messages: readonly { body: { orderId: string } }[], tx: Tx) =>
    lockStockOfReservations(
      tx,
      messages.map((message) => message.body.orderId),
    ),
};

/** The stock rows of the reservations `where` picks (read, not locked). */
const stockOfReservations = (where: Sql) => sql`
  SELECT sku FROM stock_items WHERE sku IN (
    SELECT line->>'sku' FROM reservations, jsonb_array_elements(reservations.lines) AS line WHERE ${where})`;

/**
 * Reserves `lines` (each SKU once, its rows locked by `lockStock`) for the order: the stock moves
 * from `available` to `reserved` and the reservation is written — one statement, every line.
 */
export async function takeStock(tx: Tx, reservation: NewReservation, lines: readonly Line[], now: Date): Promise<void> {
  await query(tx, sql`WITH ${takeWrite(reservation, lines, now, sql`TRUE`)} SELECT 1`);
}

/** A reservation about to be written: whose, and the order's correlation id. */
export interface NewReservation {
  readonly orderId: string;
  readonly correlationId: string;
}

/**
 * {@link takeStock}'s write as the WITH list of a statement, applied only when `onlyIf` holds
 * there: `reserved` has a row when it was.
 */
export function takeWrite(reservation: NewReservation, lines: readonly Line[], now: Date, onlyIf: Sql): Sql {
  return sql`
    taken AS (
      UPDATE stock_items
         SET available = available - line.quantity, reserved = reserved + line.quantity, updated_at = ${now}
        FROM unnest(${lines.map((l) => l.sku)}::text[], ${lines.map((l) => l.quantity)}::int[]) AS line(sku, quantity)
       WHERE stock_items.sku = line.sku AND ${onlyIf}
    ), reserved AS (
      INSERT INTO reservations (order_id, status, lines, created_at, correlation_id)
      SELECT ${reservation.orderId}::uuid, 'reserved', ${JSON.stringify(lines)}::jsonb, ${now}::timestamptz,
             ${reservation.correlationId}::uuid
       WHERE ${onlyIf}
      RETURNING order_id
    )`;
}

/**
 * Gives an order's stock back to `available`, once: what a reservation held (or, if it was paid
 * and then cancelled, what it sold). A released, expired or rejected reservation holds nothing.
 */
export async function releaseReservation(tx: Tx, orderId: string, now: Date): Promise<boolean> {
  await lockStockOfReservations(tx, [orderId]);
  return release(tx, orderId, await lockReservation(tx, orderId), now);
}

/** Gives back what `reservation` (locked, as its stock) holds or sold, and ends it released. */
export async function release(
  tx: Tx,
  orderId: string,
  reservation: { status: string; lines: Line[] } | undefined,
  now: Date,
): Promise<boolean> {
  if (reservation?.status !== 'reserved' && reservation?.status !== 'committed') return false;
  await giveBack(tx, reservation.lines, { held: reservation.status === 'reserved' }, now);
  await tx.reservation.update({ where: { orderId }, data: { status: 'released', releasedAt: now } });
  return true;
}

/**
 * Returns `lines` to `available`, each SKU once and in SKU order (as lockStock takes them); `held`
 * when they were still reserved (not yet sold), so they leave `reserved` too.
 */
export async function giveBack(tx: Tx, lines: readonly Line[], { held }: { held: boolean }, now: Date) {
  for (const { sku, quantity } of quantitiesBySku(lines)) {
    await tx.stockItem.update({
      where: { sku },
      data: {
        available: { increment: quantity },
        ...(held ? { reserved: { decrement: quantity } } : {}),
        updatedAt: now,
      },
    });
  }
}

/**
 * The order was paid: what its reservation held is sold, and leaves `reserved`. Once: only a
 * reservation still `reserved` is committed. One statement ({@link commitWrite}); answers whether
 * it committed.
 */
export async function commitReservation(tx: Tx, orderId: string, now: Date): Promise<boolean> {
  const [answer] = await query<{ committed: boolean }>(
    tx,
    sql`WITH ${commitWrite(orderId, now)} SELECT EXISTS (SELECT 1 FROM committed) AS committed`,
  );
  return answer!.committed;
}

/**
 * {@link commitReservation}'s write as the WITH list of a statement: the reservation's move
 * (`committed` has a row when it moved) and its stock — its stock rows locked first, in SKU order,
 * then the reservation (the one lock order, above: its condition reads `locked`, so the stock
 * locks are taken before the reservation's row is). The capture's consumer gives it to the inbox
 * to run with its record as one statement.
 */
export function commitWrite(orderId: string, now: Date): Sql {
  return sql`
    locked AS MATERIALIZED (
      ${stockOfReservations(sql`order_id = ${orderId}::uuid AND status = 'reserved'`)} ORDER BY sku FOR UPDATE
    ), committed AS (
      UPDATE reservations SET status = 'committed'
       WHERE order_id = ${orderId}::uuid AND status = 'reserved' AND (SELECT count(*) FROM locked) >= 0
      RETURNING lines
    ), sold AS (
      SELECT line->>'sku' AS sku, sum((line->>'quantity')::int)::int AS quantity
        FROM committed, jsonb_array_elements(committed.lines) AS line
       GROUP BY 1
    ), taken AS (
      UPDATE stock_items SET reserved = stock_items.reserved - sold.quantity, updated_at = ${now}
        FROM sold
       WHERE stock_items.sku = sold.sku
    )`;
}

export async function lockReservation(tx: Tx, orderId: string) {
  const [reservation] = await tx.$queryRaw<{ status: string; lines: Line[] }[]>`
    SELECT status, lines FROM reservations WHERE order_id = ${orderId}::uuid FOR UPDATE`;
  return reservation;
}

export const findStock = (db: PrismaClient, sku: string) => db.stockItem.findUnique({ where: { sku } });

/** An operator sets the available units of a SKU, creating it; what is reserved stays as it is. */
export const setAvailable = (db: PrismaClient, sku: string, available: number, now: Date) =>
  db.stockItem.upsert({
    where: { sku },
    create: { sku, available, updatedAt: now },
    update: { available, updatedAt: now },
  });
