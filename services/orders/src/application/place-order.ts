import { query, sql, type Sql } from '@idem/database';
import { enqueue, enqueueInOneStatement } from '@idem/outbox';
import { shop } from '@idem/shop';
import type { PrismaClient, Tx } from '../db.js';
import { priceOrder, type CatalogEntry, type LineRefusal, type PricedLine } from '../domain/pricing.js';
import { catalogEntriesOf } from './catalog.js';
import { HTTP_TRANSACTION, idempotent, keyedInOneStatement, type IdempotentResult } from './idempotency-keys.js';
import { createOrder, newOrder, orderWrite, type NewOrder, type OrderView } from './orders.js';

export type PlaceOrderResult =
  /** The order placed: now, or by the first request with the same Idempotency-Key (`replayed`, as it was then). */
  | { readonly kind: 'placed'; readonly order: unknown; readonly replayed: boolean }
  /** A line the catalog cannot sell: nothing was written, the Idempotency-Key stays free. */
  | { readonly kind: 'refused'; readonly refusals: readonly LineRefusal[] }
  | Exclude<IdempotentResult, { kind: 'done' }>;

/**
 * The catalog entries a process last read, by SKU: its guess at an order's prices, which the
 * order's one statement writes only if the catalog still says them (the catalog decides).
 */
export type CatalogAsLastRead = Map<string, CatalogEntry>;

interface Placing {
  order: NewOrder;
  correlationId: string;
  /** The caller's Idempotency-Key, and what identifies its request (the same request is the same key's). */
  idempotency: { key: string; request: unknown } | undefined;
  now: () => Date;
  keyRetentionMs: number;
  /** Kept up to date by every plain placing: what the one statement prices from. */
  catalog: CatalogAsLastRead;
}

/**
 * Places an order: priced from the catalog, the PENDING order and its `orders.order-placed.v1`
 * event commit together (transactional outbox). With an Idempotency-Key, a repeat replays the
 * first answer instead (and is not priced again). The common case — every SKU priced as this
 * process last read it, a key not used before — is one statement (`placeInOneStatement`); when
 * that writes nothing, the plain way decides, in a transaction: the same outcome and rows
 * either way (orders.int.spec.ts, "places an order as the plain way does").
 */
export async function placeOrder(db: PrismaClient, placing: Placing): Promise<PlaceOrderResult> {
  const placed = await placeInOneStatement(db, placing);
  return placed ? { kind: 'placed', order: placed, replayed: false } : placeThePlainWay(db, placing);
}

/** The plain way of {@link placeOrder}: the key, the catalog and the writes in one transaction. */
export async function placeThePlainWay(
  db: PrismaClient,
  { order, correlationId, idempotency, now, keyRetentionMs, catalog }: Placing,
): Promise<PlaceOrderResult> {
  const place = (tx: Tx) => priceAndCreate(tx, order, correlationId, now(), catalog);
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
 * cannot sell. What it read of the catalog becomes the process's `catalog` as last read.
 */
async function priceAndCreate(
  tx: Tx,
  order: NewOrder,
  correlationId: string,
  at: Date,
  catalog: CatalogAsLastRead,
): Promise<OrderView> {
  // Read in the transaction that writes the order: the prices it stores are the ones it is
  // charged, refunded and mailed at, whatever the catalog says later.
  const skus = order.lines.map((line) => line.sku);
  const entries = await catalogEntriesOf(tx, skus);
  for (const sku of skus) {
    const entry = entries.get(sku);
    if (entry) catalog.set(sku, entry);
    else catalog.delete(sku);
  }
  const pricing = priceOrder(order.lines, entries);
  // Thrown to roll the transaction back: a refused order writes nothing, not even its key.
  if (pricing.kind === 'refused') throw new OrderRefused(pricing.refusals);
  const created = await createOrder(tx, { ...order, ...pricing }, at);
  await enqueue(tx, shop, placedEvent(created, correlationId), at);
  return created;
}

/**
 * The order priced from the catalog as last read and written in one statement that runs alone,
 * with its event (and its key, when it has one), only if every line's catalog entry still says
 * that price; undefined when it wrote nothing: a line this process has not read or cannot sell,
 * a price changed since, a key used before or in flight. The plain way then decides.
 */
export async function placeInOneStatement(
  db: PrismaClient,
  { order, correlationId, idempotency, now, keyRetentionMs, catalog }: Placing,
): Promise<OrderView | undefined> {
  const pricing = priceOrder(order.lines, catalog);
  if (pricing.kind === 'refused') return undefined;
  const at = now();
  const created = newOrder({ ...order, ...pricing }, at);
  const gate = sql`EXISTS (SELECT 1 FROM ${idempotency ? sql`keyed` : sql`priced`})`;
  const pricesHold = pricesStillHold(pricing.lines, pricing.currency);
  const event = enqueueInOneStatement(db, shop, placedEvent(created, correlationId), at, gate);
  const [row] = await query<{ placed: boolean }>(
    db,
    sql`
      WITH ${
        idempotency
          ? keyedInOneStatement(
              { customerId: order.customerId, ...idempotency, now: at, retentionMs: keyRetentionMs },
              created,
              pricesHold,
            )
          : sql`priced AS (SELECT 1 WHERE ${pricesHold})`
      }, ${orderWrite(created, gate)}, event AS (${event.insert})
      SELECT ${gate} AS placed`,
  );
  if (!row?.placed) return undefined;
  event.afterCommit();
  return created;
}

/** True when the catalog sells every SKU of `lines` at its unit price, in `currency`. */
function pricesStillHold(lines: readonly PricedLine[], currency: string): Sql {
  const bySku = new Map(lines.map((line) => [line.sku, line.unitPriceCents]));
  return sql`(
    SELECT count(*) = ${bySku.size}
      FROM catalog_items
      JOIN unnest(${[...bySku.keys()]}::text[], ${[...bySku.values()]}::int[]) AS line(sku, unit_price_cents)
        ON catalog_items.sku = line.sku AND catalog_items.unit_price_cents = line.unit_price_cents
     WHERE catalog_items.currency = ${currency} AND NOT catalog_items.withdrawn)`;
}

function placedEvent(order: OrderView, correlationId: string) {
  const { orderId, customerEmail, currency, paymentMethod, lines, totalCents } = order;
  return {
    type: 'orders.order-placed.v1' as const,
    aggregateId: orderId,
    aggregateVersion: order.version,
    correlationId,
    causationId: null,
    body: { orderId, customerEmail, currency, paymentMethod, lines, totalCents },
  };
}

class OrderRefused extends Error {
  constructor(readonly refusals: readonly LineRefusal[]) {
    super('the catalog cannot sell this order');
  }
}
