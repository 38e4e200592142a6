import type { Envelope } from '@idem/shop';
import { createFaults, parseFaultRules } from '@idem/faults';
import type { TransactionalClient, TransactionOptions } from '@idem/database';
import { createTestDatabase, orderPlacedMessage, type PrismaClient, type TestDatabase } from '@idem/testkit';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { advanceAggregateVersion } from './aggregate-versions.js';
import { createInbox, type MessageHandler } from './inbox.js';
import { permanentFailure, processed, stale, transientFailure } from './outcomes.js';

type Tx = Parameters<Parameters<PrismaClient['$transaction']>[0]>[0];

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('inbox');
});
afterAll(() => db.drop());
beforeEach(async () => {
  await db.prisma.$executeRaw`TRUNCATE processed_messages, aggregate_versions, stock_items, reservations`;
  await db.prisma.stockItem.create({ data: { sku: 'sku-1', available: 10 } });
});

const orderPlaced = orderPlacedMessage;

/** Reserves one unit: a business change that is visibly wrong if applied twice. */
const reserve: MessageHandler<Tx, Envelope<'orders.order-placed.v1'>> = async (message, tx) => {
  await tx.stockItem.update({ where: { sku: 'sku-1' }, data: { available: { decrement: 1 } } });
  await tx.reservation.create({ data: { orderId: message.body.orderId, sku: 'sku-1', quantity: 1 } });
  return processed;
};

const available = async () => (await db.prisma.stockItem.findUniqueOrThrow({ where: { sku: 'sku-1' } })).available;
const records = (consumer?: string) => db.prisma.processedMessage.count({ where: consumer ? { consumer } : {} });

describe('inbox.consume', () => {
  it('commits the processed record and the business change together', async () => {
    const inbox = createInbox({ db: db.prisma });
    expect(await inbox.consume('inventory.order-placed.v1', orderPlaced(), reserve)).toEqual({ outcome: 'processed' });
    expect(await available()).toBe(9);
    expect(await records()).toBe(1);
  });

  it('classifies a redelivered message as duplicate and changes nothing', async () => {
    const inbox = createInbox({ db: db.prisma });
    const message = orderPlaced();
    await inbox.consume('inventory.order-placed.v1', message, reserve);
    let ran = false;
    const outcome = await inbox.consume('inventory.order-placed.v1', message, async (m, tx) => {
      ran = true;
      return reserve(m, tx);
    });
    expect(outcome).toEqual({ outcome: 'duplicate' });
    expect(ran).toBe(false);
    expect(await available()).toBe(9);
  });

  it('answers a run of duplicates with a read and no transaction, and still processes the next new message', async () => {
    let transactions = 0;
    const counted: TransactionalClient<Tx> = {
      $executeRaw: db.prisma.$executeRaw.bind(db.prisma),
      $queryRaw: db.prisma.$queryRaw.bind(db.prisma),
      $transaction<R>(fn: (tx: Tx) => Promise<R>, options?: TransactionOptions) {
        transactions++;
        return db.prisma.$transaction(fn, options);
      },
    };
    const inbox = createInbox({ db: counted });
    const message = orderPlaced();
    expect(await inbox.consume('inventory.order-placed.v1', message, reserve)).toEqual({ outcome: 'processed' });
    // The first duplicate is stopped by the key inside a transaction ...
    expect(await inbox.consume('inventory.order-placed.v1', message, reserve)).toEqual({ outcome: 'duplicate' });
    expect(transactions).toBe(2);
    // ... the ones after it by a read, a conflicting body included.
    expect(await inbox.consume('inventory.order-placed.v1', message, reserve)).toEqual({ outcome: 'duplicate' });
    const altered = { ...message, body: { ...message.body, totalCents: 1 } };
    expect(await inbox.consume('inventory.order-placed.v1', altered, reserve)).toMatchObject({
      outcome: 'conflicting_duplicate',
    });
    expect(transactions).toBe(2);
    // A new message after the run reads "absent", then goes through the transaction as always.
    expect(await inbox.consume('inventory.order-placed.v1', orderPlaced(), reserve)).toEqual({ outcome: 'processed' });
    expect(transactions).toBe(3);
    expect(await available()).toBe(8);
    expect(await records()).toBe(2);
  });

  it('lets the primary key decide between two instances delivering the same message at once', async () => {
    const message = orderPlaced();
    const instances = [createInbox({ db: db.connect() }), createInbox({ db: db.connect() })];
    // Both handlers pause inside their transactions so the two inserts truly overlap.
    const slow: typeof reserve = async (m, tx) => {
      await new Promise((resolve) => setTimeout(resolve, 200));
      return reserve(m, tx);
    };
    const outcomes = await Promise.all(
      instances.map((inbox) => inbox.consume('inventory.order-placed.v1', message, slow)),
    );
    expect(outcomes.map((o) => o.outcome).sort()).toEqual(['duplicate', 'processed']);
    expect(await available()).toBe(9);
    expect(await records()).toBe(1);
  });

  it('records nothing when the transaction is forced to roll back, and processes the redelivery', async () => {
    const faults = createFaults(parseFaultRules('rollback-after-handler count=1'));
    const inbox = createInbox({ db: db.prisma, faults });
    const message = orderPlaced();
    expect(await inbox.consume('inventory.order-placed.v1', message, reserve)).toMatchObject({
      outcome: 'transient_failure',
      code: 'forced_rollback',
    });
    expect(await records()).toBe(0);
    expect(await available()).toBe(10);

    expect(await inbox.consume('inventory.order-placed.v1', message, reserve)).toEqual({ outcome: 'processed' });
    expect(await available()).toBe(9);
  });

  it('processes one message id once per consumer: two consumers sharing a database both process it', async () => {
    const inbox = createInbox({ db: db.prisma });
    const message = orderPlaced();
    const count: MessageHandler<Tx> = async (_m, tx) => {
      await tx.stockItem.update({ where: { sku: 'sku-1' }, data: { available: { decrement: 1 } } });
      return processed;
    };
    expect(await inbox.consume('inventory.order-placed.v1', message, count)).toEqual({ outcome: 'processed' });
    expect(await inbox.consume('notifications.order-placed.v1', message, count)).toEqual({ outcome: 'processed' });
    expect(await available()).toBe(8);
    expect(await records()).toBe(2);
  });

  it('does not mistake a unique violation on a business table for a duplicate', async () => {
    const inbox = createInbox({ db: db.prisma });
    const first = orderPlaced();
    await inbox.consume('inventory.order-placed.v1', first, reserve);
    // A different message for the same order: its reservation insert violates reservations_pkey.
    const outcome = await inbox.consume('inventory.order-placed.v1', orderPlaced({ body: first.body }), reserve);
    expect(outcome).toMatchObject({
      outcome: 'transient_failure',
      code: 'unique_violation',
      reason: expect.stringContaining('reservations_pkey'),
    });
    expect(await records()).toBe(1);
    expect(await available()).toBe(9);
  });

  it('reports the same message id with a different body as a conflicting duplicate, changing nothing', async () => {
    const conflicts: unknown[] = [];
    const inbox = createInbox({ db: db.prisma, onConflictingDuplicate: (c) => conflicts.push(c) });
    const message = orderPlaced();
    await inbox.consume('inventory.order-placed.v1', message, reserve);
    const altered = { ...message, body: { ...message.body, totalCents: 1 } };
    const outcome = await inbox.consume('inventory.order-placed.v1', altered, reserve);
    expect(outcome).toMatchObject({
      outcome: 'conflicting_duplicate',
      reason: expect.stringContaining('different body'),
    });
    expect(conflicts).toEqual([
      expect.objectContaining({ consumer: 'inventory.order-placed.v1', messageId: message.messageId }),
    ]);
    expect(await available()).toBe(9);
  });

  it('classifies a message older than the applied aggregate version as stale and records it', async () => {
    const inbox = createInbox({ db: db.prisma });
    const versioned: MessageHandler<Tx> = async (message, tx) => {
      const fresh = await advanceAggregateVersion(tx, {
        scope: 'inventory:order',
        aggregateId: message.aggregateId,
        version: message.aggregateVersion,
        now: new Date(),
      });
      if (!fresh) return stale(`order ${message.aggregateId} is already past version ${message.aggregateVersion}`);
      await tx.stockItem.update({ where: { sku: 'sku-1' }, data: { available: { decrement: 1 } } });
      return processed;
    };
    const newer = orderPlaced({ aggregateVersion: 2 });
    const older = orderPlaced({ aggregateId: newer.aggregateId, aggregateVersion: 1 });
    expect(await inbox.consume('c', newer, versioned)).toEqual({ outcome: 'processed' });
    expect(await inbox.consume('c', older, versioned)).toMatchObject({ outcome: 'stale' });
    expect(await available()).toBe(9);
    expect(await records()).toBe(2);
    // Its redelivery is then an ordinary duplicate.
    expect(await inbox.consume('c', older, versioned)).toEqual({ outcome: 'duplicate' });
  });

  it('rolls back and records nothing when the handler refuses the message permanently', async () => {
    const inbox = createInbox({ db: db.prisma });
    const outcome = await inbox.consume('c', orderPlaced(), async (_m, tx) => {
      await tx.stockItem.update({ where: { sku: 'sku-1' }, data: { available: 0 } });
      return permanentFailure('unknown_sku', 'sku-9 is not sold here');
    });
    expect(outcome).toEqual({ outcome: 'permanent_failure', code: 'unknown_sku', reason: 'sku-9 is not sold here' });
    expect(await records()).toBe(0);
    expect(await available()).toBe(10);
  });

  it('rolls back and records nothing when the handler asks for a redelivery later', async () => {
    const inbox = createInbox({ db: db.prisma });
    const outcome = await inbox.consume('c', orderPlaced(), async (_m, tx) => {
      await tx.stockItem.update({ where: { sku: 'sku-1' }, data: { available: 0 } });
      return transientFailure('order_not_known_yet', 'the order summary has not arrived');
    });
    expect(outcome).toEqual({
      outcome: 'transient_failure',
      code: 'order_not_known_yet',
      reason: 'the order summary has not arrived',
    });
    expect(await records()).toBe(0);
    expect(await available()).toBe(10);
  });

  it('classifies a check constraint failure as permanent, never as duplicate', async () => {
    await db.prisma
      .$executeRaw`ALTER TABLE stock_items ADD CONSTRAINT stock_items_available_check CHECK (available >= 0) NOT VALID`;
    try {
      const inbox = createInbox({ db: db.prisma });
      const outcome = await inbox.consume('c', orderPlaced(), async (_m, tx) => {
        await tx.stockItem.update({ where: { sku: 'sku-1' }, data: { available: -1 } });
        return processed;
      });
      expect(outcome).toMatchObject({ outcome: 'permanent_failure', code: 'constraint_violation' });
      expect(await records()).toBe(0);
    } finally {
      await db.prisma.$executeRaw`ALTER TABLE stock_items DROP CONSTRAINT stock_items_available_check`;
    }
  });
});

describe('inbox.deadLetters', () => {
  it('keeps a dead letter with its reason until it is replayed', async () => {
    const inbox = createInbox({ db: db.prisma });
    await inbox.deadLetters.record({
      consumer: 'c',
      messageId: 'job-1',
      payload: { not: 'an envelope' },
      code: 'malformed_envelope',
      reason: 'messageId: Invalid input',
      attempts: 1,
    });
    expect(await inbox.deadLetters.list({ consumer: 'c' })).toEqual([
      expect.objectContaining({
        messageId: 'job-1',
        payload: { not: 'an envelope' },
        code: 'malformed_envelope',
        replayCount: 0,
      }),
    ]);
    const [listed] = await inbox.deadLetters.list({ consumer: 'c' });
    await inbox.deadLetters.markReplayed(listed!);
    expect(await inbox.deadLetters.list({ consumer: 'c' })).toEqual([]);
  });

  it('keeps listing a replayed message that failed again before the replay was marked', async () => {
    const inbox = createInbox({ db: db.prisma });
    const poison = {
      consumer: 'c',
      messageId: 'job-2',
      payload: {},
      code: 'malformed_envelope',
      reason: 'type: Invalid input',
      attempts: 1,
    };
    await inbox.deadLetters.record(poison);
    const [listed] = await inbox.deadLetters.list({ consumer: 'c' });
    await new Promise((resolve) => setTimeout(resolve, 5)); // the redelivery fails a moment later
    await inbox.deadLetters.record(poison);
    await inbox.deadLetters.markReplayed(listed!);
    expect(await inbox.deadLetters.list({ consumer: 'c' })).toEqual([
      expect.objectContaining({ messageId: 'job-2', replayCount: 1 }),
    ]);
  });
});
