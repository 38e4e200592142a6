/**
 * The inbox's guarantees on each database client it supports — a Prisma client and a plain
 * node-postgres pool (`fromNodePostgres`) — with the same tests: commit together, duplicates,
 * two instances racing, a forced rollback, a unique violation that is not a duplicate, a check
 * constraint that is permanent, another body under the same id. Handlers use raw SQL, which
 * both clients speak.
 */
import type { Envelope } from '@idem/contracts';
import { fromNodePostgres, type SqlClient, type TransactionalClient } from '@idem/database';
import { createFaults, parseFaultRules } from '@idem/faults';
import { createTestDatabase, orderPlacedMessage, type TestDatabase } from '@idem/testkit';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createInbox, type MessageHandler } from './inbox.js';
import { processed } from './outcomes.js';

let db: TestDatabase;
const pools: pg.Pool[] = [];
beforeAll(async () => {
  db = await createTestDatabase('inbox_clients');
});
afterAll(async () => {
  await Promise.all(pools.map((pool) => pool.end()));
  await db.drop();
});
beforeEach(async () => {
  await db.prisma.$executeRaw`TRUNCATE processed_messages, stock_items, reservations`;
  await db.prisma.$executeRaw`INSERT INTO stock_items (sku, available) VALUES ('sku-1', 10)`;
});

type Client = TransactionalClient<SqlClient>;
const CLIENTS: Record<string, () => Client> = {
  Prisma: () => db.connect(),
  'node-postgres': () => {
    const pool = new pg.Pool({ connectionString: db.url, max: 4 });
    pools.push(pool);
    return fromNodePostgres(pool);
  },
};

/** Reserves one unit: visibly wrong if applied twice. */
const reserve: MessageHandler<SqlClient, Envelope<'orders.order-placed.v1'>> = async (message, tx) => {
  await tx.$executeRaw`UPDATE stock_items SET available = available - 1 WHERE sku = 'sku-1'`;
  await tx.$executeRaw`INSERT INTO reservations (order_id, sku, quantity) VALUES (${message.body.orderId}::uuid, 'sku-1', 1)`;
  return processed;
};
const available = async () =>
  (await db.prisma.$queryRaw<{ available: number }[]>`SELECT available FROM stock_items WHERE sku = 'sku-1'`)[0]!
    .available;
const records = async () =>
  Number((await db.prisma.$queryRaw<{ n: bigint }[]>`SELECT count(*) AS n FROM processed_messages`)[0]!.n);

describe.each(Object.keys(CLIENTS))('the inbox on %s', (name) => {
  const client = CLIENTS[name]!;

  it('commits the record with the business change; the redelivery is a duplicate that changes nothing', async () => {
    const inbox = createInbox({ db: client() });
    const message = orderPlacedMessage();
    expect(await inbox.consume('inventory.order-placed.v1', message, reserve)).toEqual({ outcome: 'processed' });
    expect(await inbox.consume('inventory.order-placed.v1', message, reserve)).toEqual({ outcome: 'duplicate' });
    expect([await available(), await records()]).toEqual([9, 1]);
  });

  it('lets the primary key decide between two instances delivering the same message at once', async () => {
    const message = orderPlacedMessage();
    const slow: typeof reserve = async (m, tx) => {
      await new Promise((resolve) => setTimeout(resolve, 200)); // both inserts truly overlap
      return reserve(m, tx);
    };
    const outcomes = await Promise.all(
      [createInbox({ db: client() }), createInbox({ db: client() })].map((inbox) =>
        inbox.consume('inventory.order-placed.v1', message, slow),
      ),
    );
    expect(outcomes.map((o) => o.outcome).sort()).toEqual(['duplicate', 'processed']);
    expect([await available(), await records()]).toEqual([9, 1]);
  });

  it('records nothing when the transaction rolls back after the handler, and processes the redelivery', async () => {
    const inbox = createInbox({
      db: client(),
      faults: createFaults(parseFaultRules('rollback-after-handler count=1')),
    });
    const message = orderPlacedMessage();
    expect(await inbox.consume('inventory.order-placed.v1', message, reserve)).toMatchObject({
      outcome: 'transient_failure',
      code: 'forced_rollback',
    });
    expect([await available(), await records()]).toEqual([10, 0]);
    expect(await inbox.consume('inventory.order-placed.v1', message, reserve)).toEqual({ outcome: 'processed' });
    expect(await available()).toBe(9);
  });

  it('does not mistake a unique violation on a business table for a duplicate', async () => {
    const inbox = createInbox({ db: client() });
    const first = orderPlacedMessage();
    await inbox.consume('inventory.order-placed.v1', first, reserve);
    const outcome = await inbox.consume('inventory.order-placed.v1', orderPlacedMessage({ body: first.body }), reserve);
    expect(outcome).toMatchObject({
      outcome: 'transient_failure',
      code: 'unique_violation',
      reason: expect.stringContaining('reservations_pkey'),
    });
    expect([await available(), await records()]).toEqual([9, 1]);
  });

  it('classifies a check constraint failure as permanent, never as duplicate, and records nothing', async () => {
    await db.prisma
      .$executeRaw`ALTER TABLE stock_items ADD CONSTRAINT stock_items_available_check CHECK (available >= 0) NOT VALID`;
    try {
      const outcome = await createInbox({ db: client() }).consume('c', orderPlacedMessage(), async (_m, tx) => {
        await tx.$executeRaw`UPDATE stock_items SET available = -1`;
        return processed;
      });
      expect(outcome).toMatchObject({ outcome: 'permanent_failure', code: 'constraint_violation' });
      expect(await records()).toBe(0);
    } finally {
      await db.prisma.$executeRaw`ALTER TABLE stock_items DROP CONSTRAINT stock_items_available_check`;
    }
  });

  it('reports the same message id with another body as a conflicting duplicate, changing nothing', async () => {
    const inbox = createInbox({ db: client() });
    const message = orderPlacedMessage();
    await inbox.consume('inventory.order-placed.v1', message, reserve);
    const altered = { ...message, body: { ...message.body, totalCents: 1 } };
    expect(await inbox.consume('inventory.order-placed.v1', altered, reserve)).toMatchObject({
      outcome: 'conflicting_duplicate',
    });
    expect(await available()).toBe(9);
  });
});
