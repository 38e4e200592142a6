import { subscribersOf, type ConsumerName } from '@idem/shop';
import { createInbox } from '@idem/inbox';
import { query, runningAfterCommit, sql } from '@idem/database';
import { createRelay, enqueueInOneStatement, handoffFor } from '@idem/outbox';
import {
  createTestDatabase,
  deleteQueues,
  uniqueName,
  waitFor,
  type TestDatabase,
  exited,
  printed,
  startScript,
} from '@idem/testkit';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { KEEP_NOTHING, orderPlaced, reserveOneUnit, writeOrders as writeOrdersIn } from '../test/fixtures.js';
import { startConsumer, type DeliveryReport } from './consumer.js';
import { createPublisher } from './publisher.js';
import { shop } from '@idem/shop';

const SUBSCRIBERS = subscribersOf('orders.order-placed.v1');
let db: TestDatabase;
let prefix: string;
const prefixes: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase('relay');
});
afterAll(async () => {
  await Promise.all(prefixes.map(deleteQueues));
  await db.drop();
});
beforeEach(async () => {
  prefix = uniqueName('idem_test_relay');
  prefixes.push(prefix);
  await db.prisma.$executeRaw`TRUNCATE outbox_messages, processed_messages, stock_items, reservations`;
  await db.prisma.stockItem.createMany({ data: SUBSCRIBERS.map((sku) => ({ sku, available: 1000 })) });
});

const writeOrders = (count: number) => writeOrdersIn(db.prisma, count);

/** Every subscriber of order-placed consuming, each delivery reported. */
function subscribe() {
  const reports: DeliveryReport[] = [];
  const consumers = SUBSCRIBERS.map((consumer) =>
    startConsumer({
      catalogue: shop,
      consumer,
      inbox: createInbox({ db: db.prisma }),
      handler: reserveOneUnit(consumer),
      prefix,
      policy: KEEP_NOTHING, // a second publication of a message id is a second job
      onDelivery: (report) => reports.push(report),
    }),
  );
  return { reports, consumers };
}

/** Runs `script` (in test/) with its fault switch set to kill it after it published 5 rows and before it marked them. */
async function killedBetweenPublishAndMark(script: string, env: Record<string, string>) {
  const child = startScript(new URL(`../test/${script}`, import.meta.url), {
    DATABASE_URL: db.url,
    IDEM_PREFIX: prefix,
    IDEM_FAULTS_ENABLED: '1',
    IDEM_FAULTS: 'crash-after-publish count=1',
    ...env,
  });
  await printed(child, 'ready');
  expect(await exited(child)).toBe('SIGKILL');
  expect(await db.prisma.outboxMessage.count({ where: { publishedAt: null } })).toBe(5); // published, never marked
}

/** Deliveries that wait for `consumer`, not started yet: in its subscription, or in its queue. */
async function waiting(consumer: ConsumerName) {
  const publisher = createPublisher({ catalogue: shop, prefix });
  try {
    return (await publisher.jobCounts(consumer)).waiting;
  } finally {
    await publisher.close();
  }
}

describe('outbox relay over BullMQ', () => {
  it('republishes after a relay is SIGKILLed between publish and mark, and every consumer suppresses the second copy', async () => {
    const { reports, consumers } = subscribe();
    try {
      const written = await writeOrders(5);
      await killedBetweenPublishAndMark('relay-process.ts', {});
      const count = (outcome: string) => reports.filter((r) => r.outcome.outcome === outcome).length;
      await waitFor(() => count('processed') === 10, { what: 'the first copies' });

      // A healthy relay publishes the unmarked rows again: the accepted duplicate.
      const publisher = createPublisher({ catalogue: shop, prefix });
      const relay = createRelay({ db: db.prisma, publish: (batch) => publisher.publish(batch) });
      expect(await relay.publishBatch()).toEqual({ published: 5 });
      await publisher.close();

      await waitFor(() => count('duplicate') === 10, { what: 'the second copies' });
      for (const consumer of SUBSCRIBERS) {
        const ofConsumer = reports.filter((r) => r.consumer === consumer);
        expect(
          ofConsumer
            .filter((r) => r.outcome.outcome === 'processed')
            .map((r) => r.messageId)
            .sort(),
        ).toEqual(written.map((e) => e.messageId).sort());
        const stock = await db.prisma.stockItem.findUniqueOrThrow({ where: { sku: consumer } });
        expect(stock.available).toBe(1000 - 5);
      }
    } finally {
      await Promise.all(consumers.map((c) => c.close(1000)));
    }
  });

  it('keeps several batches of one relay in flight at once, each row published once', async () => {
    const written = await writeOrders(120);
    const publisher = createPublisher({ catalogue: shop, prefix });
    const published: string[] = [];
    let inFlight = 0;
    let mostInFlight = 0;
    const relay = createRelay({
      db: db.connect(),
      batchSize: 10,
      concurrency: 3,
      publish: async (batch) => {
        mostInFlight = Math.max(mostInFlight, ++inFlight);
        await new Promise((resolve) => setTimeout(resolve, 50)); // a slow broker: the next batches are claimed meanwhile
        published.push(...batch.map((e) => e.messageId));
        await publisher.publish(batch);
        inFlight--;
      },
    });
    relay.start();
    try {
      await waitFor(async () => (await db.prisma.outboxMessage.count({ where: { publishedAt: null } })) === 0, {
        what: 'an empty backlog',
      });
    } finally {
      await relay.stop();
      await publisher.close();
    }
    expect(mostInFlight).toBe(3);
    expect(published).toHaveLength(120);
    expect(new Set(published)).toEqual(new Set(written.map((e) => e.messageId)));
  });

  it('lets several relays drain one outbox: every row published, none twice, none lost', async () => {
    const written = await writeOrders(300);
    const publisher = createPublisher({ catalogue: shop, prefix });
    const published: string[] = [];
    const relays = [1, 2, 3].map(() =>
      createRelay({
        db: db.connect(),
        batchSize: 20,
        publish: async (batch) => {
          published.push(...batch.map((e) => e.messageId));
          await publisher.publish(batch);
        },
      }),
    );
    relays.forEach((relay) => relay.start());
    try {
      await waitFor(async () => (await db.prisma.outboxMessage.count({ where: { publishedAt: null } })) === 0, {
        what: 'an empty backlog',
      });
    } finally {
      await Promise.all(relays.map((relay) => relay.stop()));
      await publisher.close();
    }
    expect(published).toHaveLength(300);
    expect(new Set(published)).toEqual(new Set(written.map((e) => e.messageId)));
    for (const consumer of SUBSCRIBERS) expect(await waiting(consumer)).toBe(300);
  });

  it("hands a transaction's events to the broker at its commit: the same rows and deliveries as the relay gives, no relay running", async () => {
    const { reports, consumers } = subscribe();
    const publisher = createPublisher({ catalogue: shop, prefix });
    const writer = runningAfterCommit(db.connect());
    const published: number[] = [];
    handoffFor(writer).start({
      publish: (envelopes) => publisher.publish(envelopes),
      onPublished: (n) => published.push(n),
    });
    const rows = () =>
      db.prisma.$queryRaw<{ type: string; attempts: number; published: boolean; last_error: string | null }[]>`
        SELECT type, attempts, published_at IS NOT NULL AS published, last_error FROM outbox_messages ORDER BY position`;
    try {
      // The relay's way: enqueued in a plain transaction, published by a relay batch.
      const relayed = await writeOrders(3);
      const relay = createRelay({ db: db.prisma, publish: (batch) => publisher.publish(batch) });
      expect(await relay.publishBatch()).toEqual({ published: 3 });
      // The handoff's way: no relay; the rows are not even due for one until long after.
      const handed = await writeOrdersIn(writer, 3);
      await waitFor(async () => (await rows()).every((row) => row.published), { what: 'the handoff marks its rows' });
      expect(published).toEqual([3]);
      expect(await relay.publishBatch()).toEqual({ published: 0 });
      const [relayedRows, handedRows] = [(await rows()).slice(0, 3), (await rows()).slice(3)];
      expect(handedRows).toEqual(relayedRows);
      await waitFor(() => reports.length === 12, { what: 'every delivery' });
      // published_at is when each row was published (before its deliveries), not when it was marked.
      const [{ inOrder } = { inOrder: false }] = await db.prisma.$queryRaw<{ inOrder: boolean }[]>`
        SELECT bool_and(o.published_at <= p.processed_at) AS "inOrder"
          FROM outbox_messages o JOIN processed_messages p ON p.message_id = o.message_id
         WHERE o.message_id = ANY(${handed.map((e) => e.messageId)}::uuid[])`;
      expect(inOrder).toBe(true);
      for (const consumer of SUBSCRIBERS) {
        const processed = reports.filter((r) => r.consumer === consumer && r.outcome.outcome === 'processed');
        expect(processed.map((r) => r.messageId).sort()).toEqual(
          [...relayed, ...handed].map((e) => e.messageId).sort(),
        );
        expect((await db.prisma.stockItem.findUniqueOrThrow({ where: { sku: consumer } })).available).toBe(1000 - 6);
      }
    } finally {
      await handoffFor(writer).stop();
      await Promise.all(consumers.map((c) => c.close(1000)));
      await publisher.close();
    }
  });

  it('hands over an event a statement wrote alone once its writer says it committed, and writes none where its condition did not hold', async () => {
    const writer = runningAfterCommit(db.connect());
    const published: string[] = [];
    handoffFor(writer).start({
      publish: async (envelopes) => void published.push(...envelopes.map((e) => e.messageId)),
    });
    /** One statement with an event in it, as the inbox's one-statement route runs one. */
    const writeAlone = async (holds: boolean) => {
      const event = enqueueInOneStatement(writer, shop, orderPlaced(), new Date(), sql`${holds}::boolean`);
      const [{ wrote } = { wrote: 0 }] = await query<{ wrote: number }>(
        writer,
        sql`WITH event AS (${event.insert}) SELECT count(*)::int AS wrote FROM event`,
      );
      if (wrote === 1) event.afterCommit();
      return event.envelope;
    };
    try {
      const written = await writeAlone(true);
      await writeAlone(false);
      await waitFor(
        async () => (await db.prisma.outboxMessage.count({ where: { publishedAt: { not: null } } })) === 1,
        {
          what: 'the handoff marks its row',
        },
      );
      expect(published).toEqual([written.messageId]);
      const rows = await db.prisma.outboxMessage.findMany();
      expect(rows.map((row) => row.messageId)).toEqual([written.messageId]);
      expect(rows[0]!.nextAttemptAt.getTime()).toBeGreaterThan(rows[0]!.createdAt.getTime()); // left to the handoff
    } finally {
      await handoffFor(writer).stop();
    }
  });

  it('leaves the events of a handoff that failed to the relay, which sweeps them once they are due', async () => {
    const writer = runningAfterCommit(db.connect());
    handoffFor(writer).start({ publish: () => Promise.reject(new Error('the broker is down')), sweepAfterMs: 1_000 });
    const publisher = createPublisher({ catalogue: shop, prefix });
    const relay = createRelay({ db: db.prisma, publish: (batch) => publisher.publish(batch) });
    try {
      await writeOrdersIn(writer, 4);
      expect(await relay.publishBatch()).toEqual({ published: 0 }); // not due yet: the writer's own
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(await relay.publishBatch()).toEqual({ published: 4 });
      for (const consumer of SUBSCRIBERS) expect(await waiting(consumer)).toBe(4);
    } finally {
      await handoffFor(writer).stop();
      await publisher.close();
    }
  });

  it('republishes after a writer is SIGKILLed between its handoff and the mark, and every consumer suppresses the second copy', async () => {
    const { reports, consumers } = subscribe();
    try {
      await killedBetweenPublishAndMark('writer-process.ts', { SWEEP_AFTER_MS: '500', ORDERS: '5' });
      const count = (outcome: string) => reports.filter((r) => r.outcome.outcome === outcome).length;
      await waitFor(() => count('processed') === 10, { what: 'the first copies' });

      // What the writer left, the relay sweeps: the accepted duplicate.
      const publisher = createPublisher({ catalogue: shop, prefix });
      const relay = createRelay({ db: db.prisma, publish: (batch) => publisher.publish(batch) });
      let swept = 0; // each row comes due on its own (written a moment apart): one sweep may take some
      await waitFor(async () => (swept += (await relay.publishBatch()).published) === 5, { what: 'the sweep' });
      await publisher.close();
      await waitFor(() => count('duplicate') === 10, { what: 'the second copies' });
      for (const consumer of SUBSCRIBERS) {
        const stock = await db.prisma.stockItem.findUniqueOrThrow({ where: { sku: consumer } });
        expect(stock.available).toBe(1000 - 5);
      }
    } finally {
      await Promise.all(consumers.map((c) => c.close(1000)));
    }
  });
});
