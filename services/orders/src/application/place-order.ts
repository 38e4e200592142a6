import { enqueue } from '@idem/outbox';
import { shop } from '@idem/shop';
import type { PrismaClient, Tx } from '../db.js';
import { priceOrder, type LineRefusal } from '../domain/pricing.js';
import { catalogEntriesOf } from './catalog.js';
import { HTTP_TRANSACTION, idempotent, type IdempotentResult } from './idempotency-keys.js';
import { createOrder, type NewOrder, type OrderView } from './orders.js';

export type PlaceOrderResult =
  /** The order placed: now, or by the first request with the same Idempotency-Key (`replayed`, as it was then). */
  | { readonly kind: 'placed'; readonly order: unknown; readonly replayed: boolean }
  /** A line the catalog cannot sell: nothing was written, the Idempotency-Key stays free. */
  | { readonly kind: 'refused'; readonly refusals: readonly LineRefusal[] }
  | Exclude<IdempotentResult, { kind: 'done' }>;

/**
 * Places an order: priced from the catalog in its own transaction, the PENDING order and its
 * `orders.order-placed.v1` event commit together (transactional outbox). With an
 * Idempotency-Key, a repeat replays the first answer instead (and is not priced again).
 */
export async function placeOrder(
  db: PrismaClient,
  {
    order,
    correlationId,
    idempotency,
    now,
    keyRetentionMs,
  }: {
    order: NewOrder;
    correlationId: string;
    /** The caller's Idempotency-Key, and what identifies its request (the same request is the same key's). */
    idempotency: { key: string; request: unknown } | undefined;
    now: () => Date;
    keyRetentionMs: number;
  },
): Promise<PlaceOrderResult> {
  const place = (tx: Tx) => priceAndCreate(tx, order, correlationId, now());
  try {
    if (idempotency === undefined) {
      return { kind: 'placed', order: await db.$transaction(place, HTTP_TRANSACTION), replayed: false };
    }
    const done = await idempotent(
      db,
      { customerId: order.customerId, ...idempotency, now: now(), retentionMs: keyRetentionMs },
      place,
    );
    return done.kind === 'done' ? { kind: 'placed', order: done.result, replayed: done.replayed } : done;
  } catch (error) {
    if (error instanceof OrderRefused) return { kind: 'refused', refusals: error.refusals };
    throw error;
  }
}

/**
 * The order, priced from the catalog and created PENDING with its `orders.order-placed.v1` event,
 * in the caller's transaction; throws `OrderRefused` (rolling it back) for a line the catalog
 * cannot sell.
 */
async function priceAndCreate(tx: Tx, order: NewOrder, correlationId: string, at: Date): Promise<OrderView> {
  // Read in the transaction that writes the order: the prices it stores are the ones it is
  // charged, refunded and mailed at, whatever the catalog says later.
  const pricing = priceOrder(
    order.lines,
    await catalogEntriesOf(
      tx,
      order.lines.map((line) => line.sku),
    ),
  );
  // Thrown to roll the transaction back: a refused order writes nothing, not even its key.
  if (pricing.kind === 'refused') throw new OrderRefused(pricing.refusals);
  const created = await createOrder(tx, { ...order, ...pricing }, at);
  const { orderId, customerEmail, currency, paymentMethod, lines, totalCents } = created;
  await enqueue(
    tx,
    shop,
    {
      type: 'orders.order-placed.v1',
      aggregateId: orderId,
      aggregateVersion: created.version,
      correlationId,
      causationId: null,
      body: { orderId, customerEmail, currency, paymentMethod, lines, totalCents },
    },
    at,
  );
  return created;
}

class OrderRefused extends Error {
  constructor(readonly refusals: readonly LineRefusal[]) {
    super('the catalog cannot sell this order');
  }
}
