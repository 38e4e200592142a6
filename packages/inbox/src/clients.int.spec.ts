/**
 * The inbox's guarantees on each database client it supports — a Prisma client and a plain
 * node-postgres pool (`fromNodePostgres`) — with the same tests: commit together, duplicates,
 * two instances racing, a forced rollback, a unique violation that is not a duplicate, a check
 * constraint that is permanent, another body under the same id. Handlers use raw SQL, which
 * both clients speak.
 */
import type { Envelope } from '@idem/shop';
import { fromNodePostgres, type SqlClient, type TransactionalClient } from '@idem/database';
import { createFaults, parseFaultRules } from '@idem/faults';
import { createTestDatabase, orderPlacedMessage, type TestDatabase } from '@idem/testkit';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createInbox, type MessageHandler } from './inbox.js';
import { permanentFailure, processed } from './outcomes.js';

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

describe.each(Object.keys(CLIENTS))('group commit (inbox.consumeBatch) on %s', (name) => {
  const client = CLIENTS[name]!;
  const consumer = 'inventory.order-placed.v1';
  /** The client, counting the transactions it opens. */
  const counting = () => {
    const inner = client();
    const counted = { transactions: 0 };
    const db: Client = {
      $executeRaw: inner.$executeRaw.bind(inner),
      $queryRaw: inner.$queryRaw.bind(inner),
      $transaction(fn, options) {
        counted.transactions++;
        return inner.$transaction(fn, options);
      },
    };
    return { db, counted };
  };

  it('commits a batch in one transaction: duplicates, already processed or twice in the batch, change nothing', async () => {
    const { db, counted } = counting();
    const inbox = createInbox({ db });
    const earlier = orderPlacedMessage();
    await inbox.consume(consumer, earlier, reserve);
    const [first, second] = [orderPlacedMessage(), orderPlacedMessage()];
    counted.transactions = 0;
    expect(await inbox.consumeBatch(consumer, [earlier, first, second, first], reserve)).toEqual([
      { outcome: 'duplicate' },
      { outcome: 'processed' },
      { outcome: 'processed' },
      { outcome: 'duplicate' },
    ]);
    expect(counted.transactions).toBe(1);
    expect([await available(), await records()]).toEqual([7, 3]);
  });

  it('rolls a batch back when a message is refused or fails, and consumes it one message at a time: each ends on its own', async () => {
    const { db, counted } = counting();
    const inbox = createInbox({ db });
    const earlier = orderPlacedMessage();
    await inbox.consume(consumer, earlier, reserve);
    const [first, refused, poison, last] = [
      orderPlacedMessage(),
      orderPlacedMessage(),
      orderPlacedMessage({ body: earlier.body }), // its reservation breaks reservations_pkey
      orderPlacedMessage(),
    ];
    const handler: typeof reserve = async (message, tx) =>
      message === refused ? permanentFailure('out_of_policy', 'refused by the handler') : reserve(message, tx);
    counted.transactions = 0;
    expect(await inbox.consumeBatch(consumer, [first, refused, poison, last], handler)).toEqual([
      { outcome: 'processed' },
      { outcome: 'permanent_failure', code: 'out_of_policy', reason: 'refused by the handler' },
      expect.objectContaining({ outcome: 'transient_failure', code: 'unique_violation' }),
      { outcome: 'processed' },
    ]);
    expect(counted.transactions).toBe(1 + 4);
    expect([await available(), await records()]).toEqual([7, 3]);
  });

  it('processes nothing when the shared commit fails: every message gets the failure', async () => {
    // A deferred constraint trigger: every statement succeeds, the COMMIT is refused.
    await db.prisma.$executeRawUnsafe(`CREATE FUNCTION refuse_commit() RETURNS trigger LANGUAGE plpgsql AS
      $$ BEGIN RAISE EXCEPTION 'refused at commit' USING ERRCODE = '40001'; END $$`);
    await db.prisma.$executeRawUnsafe(`CREATE CONSTRAINT TRIGGER refuse_commit AFTER INSERT ON reservations
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_commit()`);
    const inbox = createInbox({ db: client() });
    const batch = [orderPlacedMessage(), orderPlacedMessage()];
    try {
      const outcomes = await inbox.consumeBatch(consumer, batch, reserve);
      expect(outcomes.map((o) => o.outcome)).toEqual(['transient_failure', 'transient_failure']);
      expect([await available(), await records()]).toEqual([10, 0]);
    } finally {
      await db.prisma.$executeRawUnsafe('DROP TRIGGER refuse_commit ON reservations');
      await db.prisma.$executeRawUnsafe('DROP FUNCTION refuse_commit');
    }
    // Redelivered, both are processed.
    expect((await inbox.consumeBatch(consumer, batch, reserve)).map((o) => o.outcome)).toEqual([
      'processed',
      'processed',
    ]);
  });

  it('rolls the batch back when the fault switch forces a rollback, then processes each message once', async () => {
    const faults = createFaults(parseFaultRules('rollback-after-handler count=1'));
    const { db, counted } = counting();
    const inbox = createInbox({ db, faults });
    const outcomes = await inbox.consumeBatch(consumer, [orderPlacedMessage(), orderPlacedMessage()], reserve);
    expect(outcomes.map((o) => o.outcome)).toEqual(['processed', 'processed']);
    expect(counted.transactions).toBe(1 + 2);
    expect([await available(), await records()]).toEqual([8, 2]);
  });

  it('compares message ids as PostgreSQL stores them: an upper-case id is new, then a duplicate', async () => {
    const inbox = createInbox({ db: client() });
    const message = orderPlacedMessage();
    const upper = { ...message, messageId: message.messageId.toUpperCase() };
    expect(await inbox.consumeBatch(consumer, [upper, orderPlacedMessage()], reserve)).toEqual([
      { outcome: 'processed' },
      { outcome: 'processed' },
    ]);
    expect(await inbox.consumeBatch(consumer, [message, orderPlacedMessage()], reserve)).toEqual([
      { outcome: 'duplicate' },
      { outcome: 'processed' },
    ]);
    expect([await available(), await records()]).toEqual([7, 3]);
  });

  it('answers a run of duplicates with one read and no transaction', async () => {
    const { db, counted } = counting();
    const inbox = createInbox({ db });
    const batch = [orderPlacedMessage(), orderPlacedMessage()];
    await inbox.consumeBatch(consumer, batch, reserve);
    // The first duplicates are stopped by the key inside a transaction; the ones after by a read.
    await inbox.consumeBatch(consumer, batch, reserve);
    counted.transactions = 0;
    expect(await inbox.consumeBatch(consumer, batch, reserve)).toEqual([
      { outcome: 'duplicate' },
      { outcome: 'duplicate' },
    ]);
    expect(counted.transactions).toBe(0);
    expect([await available(), await records()]).toEqual([8, 2]);
  });

  it('lets two instances batch the same messages at once: one effect each', async () => {
    const messages = Array.from({ length: 4 }, () => orderPlacedMessage());
    const slow: typeof reserve = async (m, tx) => {
      await new Promise((resolve) => setTimeout(resolve, 50)); // the two batches truly overlap
      return reserve(m, tx);
    };
    const [one, other] = await Promise.all([
      createInbox({ db: client() }).consumeBatch(consumer, messages, slow),
      createInbox({ db: client() }).consumeBatch(consumer, [...messages].reverse(), slow),
    ]);
    const byMessage = messages.map((_, i) => [one[i]!.outcome, other[messages.length - 1 - i]!.outcome].sort());
    expect(byMessage).toEqual(messages.map(() => ['duplicate', 'processed']));
    expect([await available(), await records()]).toEqual([6, 4]);
  });
});
