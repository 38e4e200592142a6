import { randomUUID } from 'node:crypto';
import type { Envelope } from '@idem/shop';
import { createFaults, parseFaultRules } from '@idem/faults';
import { sql, type TransactionalClient, type TransactionOptions } from '@idem/database';
import { createTestDatabase, orderPlacedMessage, type PrismaClient, type TestDatabase } from '@idem/testkit';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createInbox, type InboxOptions } from './inbox.js';
import type { OneStatementHandler } from './one-statement.js';
import { processed, stale } from './outcomes.js';

type Tx = Parameters<Parameters<PrismaClient['$transaction']>[0]>[0];
type OrderPlaced = Envelope<'orders.order-placed.v1'>;

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('inbox_one_statement');
});
afterAll(() => db.drop());

/** Two SKUs alike, one for each way, so both run the same sequence side by side. */
const SKUS = { oneStatement: 'sku-one', plain: 'sku-plain' } as const;
type Way = keyof typeof SKUS;
beforeEach(async () => {
  await db.prisma.$executeRaw`TRUNCATE processed_messages, stock_items, reservations`;
  await db.prisma.stockItem.createMany({ data: Object.values(SKUS).map((sku) => ({ sku, available: 2 })) });
});

/**
 * Reserves one unit while stock lasts, stale once it is gone. Its common case is one statement;
 * the plain way (the inbox's transaction) decides everything, that case included.
 */
const reserving = (sku: string): OneStatementHandler<Tx, OrderPlaced> =>
  Object.assign(
    async (message: OrderPlaced, tx: Tx) => {
      const [stock] = await tx.$queryRaw<{ available: number }[]>`
        SELECT available FROM stock_items WHERE sku = ${sku} FOR UPDATE`;
      if (!stock || stock.available < 1) return stale(`${sku} is sold out`);
      await tx.stockItem.update({ where: { sku }, data: { available: { decrement: 1 } } });
      await tx.reservation.create({ data: { orderId: message.body.orderId, sku, quantity: 1 } });
      return processed;
    },
    {
      inOneStatement: (message: OrderPlaced) => ({
        with: sql`
          taken AS (
            UPDATE stock_items SET available = available - 1 WHERE sku = ${sku} AND available >= 1 RETURNING sku
          ), reserved AS (
            INSERT INTO reservations (order_id, sku, quantity) SELECT ${message.body.orderId}::uuid, sku, 1 FROM taken
          )`,
        wrote: 'taken',
      }),
    },
  );

/** A client that counts what the inbox asks of it: statements outside a transaction, and transactions. */
function counting() {
  const asked = { statements: 0, transactions: 0 };
  const client: TransactionalClient<Tx> = {
    $executeRaw: (...args) => (asked.statements++, db.prisma.$executeRaw(...args)),
    $queryRaw: (...args) => (asked.statements++, db.prisma.$queryRaw(...args)),
    $transaction<R>(fn: (tx: Tx) => Promise<R>, options?: TransactionOptions) {
      asked.transactions++;
      return db.prisma.$transaction(fn, options);
    },
  };
  return { client, asked };
}

/** The plain way's order for each order of the one-statement way (a reservation is keyed by its order). */
const twins = new Map<string, string>();
const twinOf = (orderId: string) => twins.get(orderId) ?? (twins.set(orderId, randomUUID()), twins.get(orderId)!);

/** One delivery of `message`, to each way's own SKU; the plain way's is about the order's twin. */
async function deliver(way: Way, message: OrderPlaced, options: Partial<InboxOptions<Tx>> = {}) {
  const inbox = createInbox({ db: db.prisma, ...options });
  const consumer = `inventory.${way}`;
  const handler = reserving(SKUS[way]);
  if (way === 'oneStatement') return inbox.consumeInOneStatement(consumer, message, handler);
  return inbox.consume(
    consumer,
    { ...message, body: { ...message.body, orderId: twinOf(message.body.orderId) } },
    handler,
  );
}

/** What each way left: its stock, its reservations (the plain way's by the twin's original), its records. */
async function rowsOf(way: Way) {
  const sku = SKUS[way];
  const original = new Map([...twins].map(([orderId, twin]) => [twin, orderId]));
  const stock = await db.prisma.stockItem.findUniqueOrThrow({ where: { sku } });
  const reservations = await db.prisma.reservation.findMany({ where: { sku } });
  const records = await db.prisma.processedMessage.findMany({ where: { consumer: `inventory.${way}` } });
  return {
    available: stock.available,
    reservations: reservations.map((r) => original.get(r.orderId) ?? r.orderId).sort(),
    records: records.map((r) => r.messageId).sort(),
  };
}

describe('inbox.consumeInOneStatement', () => {
  it('gives the outcomes and rows of consume: firsts, a duplicate, a reused id, sold out, a duplicate of a sold-out one', async () => {
    const [first, second, third] = [orderPlacedMessage(), orderPlacedMessage(), orderPlacedMessage()];
    const reused = { ...first, body: { ...first.body, totalCents: first.body.totalCents + 1 } };
    const sequence = [first, first, reused, second, third, third];
    const outcomes: Record<Way, unknown[]> = { oneStatement: [], plain: [] };
    for (const message of sequence) {
      for (const way of ['oneStatement', 'plain'] as const) outcomes[way].push(await deliver(way, message));
    }
    // The same outcomes (their reasons name each way's consumer and SKU) ...
    const named = (way: Way) => outcomes[way].map((o) => (o as { outcome: string }).outcome);
    expect(named('oneStatement')).toEqual(named('plain'));
    expect(named('plain')).toEqual([
      'processed',
      'duplicate',
      'conflicting_duplicate',
      'processed',
      'stale', // the stock is gone: the plain way records it as stale
      'duplicate',
    ]);
    // ... and the same rows.
    expect(await rowsOf('oneStatement')).toEqual(await rowsOf('plain'));
  });

  it('asks one statement and no transaction for its common case, and consume for the rest', async () => {
    const { client, asked } = counting();
    const inbox = createInbox({ db: client });
    const handler = reserving(SKUS.oneStatement);
    expect(await inbox.consumeInOneStatement('inventory.one', orderPlacedMessage(), handler)).toEqual(processed);
    expect(asked).toEqual({ statements: 1, transactions: 0 });
    await inbox.consumeInOneStatement('inventory.one', orderPlacedMessage(), handler);
    // Sold out: the statement writes nothing, and consume's transaction decides (stale).
    const soldOut = await inbox.consumeInOneStatement('inventory.one', orderPlacedMessage(), handler);
    expect(soldOut).toMatchObject({ outcome: 'stale' });
    expect(asked).toEqual({ statements: 3, transactions: 1 });
  });

  it('gives one of two deliveries of a message at the same moment its effect, the other is a duplicate', async () => {
    const message = orderPlacedMessage();
    const outcomes = await Promise.all([
      deliver('oneStatement', message),
      deliver('oneStatement', message),
      deliver('oneStatement', message),
    ]);
    expect(outcomes.map((o) => o.outcome).sort()).toEqual(['duplicate', 'duplicate', 'processed']);
    expect(await rowsOf('oneStatement')).toMatchObject({
      available: 1,
      reservations: [message.body.orderId],
    });
  });

  it('runs the effect’s afterCommit once its statement committed with its record — never for a copy, a write that did not apply, a rollback — and takes a declined message the plain way', async () => {
    const committed: string[] = [];
    const faults = createFaults(parseFaultRules('rollback-after-handler consumer=inventory.oneStatement count=1'));
    const inbox = createInbox({ db: db.prisma, faults });
    const plain = reserving(SKUS.oneStatement);
    const handler: OneStatementHandler<Tx, OrderPlaced> = Object.assign(plain.bind(null), {
      // Asynchronous, as a handler that reads first is.
      inOneStatement: async (message: OrderPlaced) => {
        if (message.body.customerEmail === 'decline@example.com') return undefined;
        const effect = await plain.inOneStatement(message, db.prisma);
        return effect && { ...effect, afterCommit: () => void committed.push(message.messageId) };
      },
    });
    const deliver = (message: OrderPlaced) => inbox.consumeInOneStatement('inventory.oneStatement', message, handler);
    const [first, second, soldOut] = [orderPlacedMessage(), orderPlacedMessage(), orderPlacedMessage()];
    expect(await deliver(first)).toMatchObject({ outcome: 'transient_failure', code: 'forced_rollback' });
    expect(committed).toEqual([]);
    expect(await deliver(first)).toEqual(processed);
    expect(await deliver(first)).toMatchObject({ outcome: 'duplicate' });
    expect(committed).toEqual([first.messageId]);
    // Declined: the plain way decides it (and takes the last unit); sold out: nothing written.
    const declined = { ...second, body: { ...second.body, customerEmail: 'decline@example.com' } };
    expect(await deliver(declined)).toEqual(processed);
    expect(await deliver(soldOut)).toMatchObject({ outcome: 'stale' });
    expect(committed).toEqual([first.messageId]);
    expect(await rowsOf('oneStatement')).toMatchObject({
      available: 0,
      reservations: [first.body.orderId, declined.body.orderId].sort(),
    });
  });

  it('rolls back what the statement wrote when the rollback-after-handler switch fires, and the redelivery processes it', async () => {
    const faults = createFaults(parseFaultRules('rollback-after-handler consumer=inventory.oneStatement count=1'));
    const message = orderPlacedMessage();
    expect(await deliver('oneStatement', message, { faults })).toMatchObject({
      outcome: 'transient_failure',
      code: 'forced_rollback',
    });
    expect(await rowsOf('oneStatement')).toEqual({ available: 2, reservations: [], records: [] });
    expect(await deliver('oneStatement', message, { faults })).toEqual(processed);
    expect(await rowsOf('oneStatement')).toMatchObject({
      available: 1,
      reservations: [message.body.orderId],
    });
  });
});
