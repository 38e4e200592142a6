import { randomUUID } from 'node:crypto';
import { subscribersOf, type ConsumerName, type Envelope } from '@idem/shop';
import { createInbox } from '@idem/inbox';
import { createRelay, enqueue } from '@idem/outbox';
import {
  createTestDatabase,
  deleteQueues,
  redisUrl,
  uniqueName,
  waitFor,
  type TestDatabase,
  exited,
  printed,
  startScript,
} from '@idem/testkit';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { reserveOneUnit } from '../test/fixtures.js';
import { startConsumer, type DeliveryReport } from './consumer.js';
import { defaultDeliveryPolicy } from './delivery-policy.js';
import { createPublisher } from './publisher.js';
import { shop } from '@idem/shop';

const SUBSCRIBERS = subscribersOf('orders.order-placed.v1');
let db: TestDatabase;
let prefix: string;
let redis: Redis;
const prefixes: string[] = [];

beforeAll(async () => {
  db = await createTestDatabase('relay');
  redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
});
afterAll(async () => {
  redis.disconnect();
  await Promise.all(prefixes.map(deleteQueues));
  await db.drop();
});
beforeEach(async () => {
  prefix = uniqueName('idem_test_relay');
  prefixes.push(prefix);
  await db.prisma.$executeRaw`TRUNCATE outbox_messages, processed_messages, stock_items, reservations`;
  await db.prisma.stockItem.createMany({ data: SUBSCRIBERS.map((sku) => ({ sku, available: 1000 })) });
});

async function writeOrders(count: number): Promise<Envelope[]> {
  return db.prisma.$transaction(async (tx) => {
    const written: Envelope[] = [];
    for (let i = 0; i < count; i++) {
      const orderId = randomUUID();
      written.push(
        await enqueue(
          tx,
          shop,
          {
            type: 'orders.order-placed.v1',
            body: {
              orderId,
              customerEmail: 'ada@example.com',
              currency: 'eur',
              paymentMethod: 'pm_card_visa',
              lines: [{ sku: 'sku-1', quantity: 1, unitPriceCents: 100 }],
              totalCents: 100,
            },
            aggregateId: orderId,
            aggregateVersion: 1,
            correlationId: randomUUID(),
            causationId: null,
          },
          new Date(),
        ),
      );
    }
    return written;
  });
}

async function queueCounts(consumer: ConsumerName) {
  const queue = new Queue(consumer, { connection: redis, prefix });
  return queue.getJobCounts('wait', 'active', 'completed', 'failed');
}

describe('outbox relay over BullMQ', () => {
  it('republishes after a relay is SIGKILLed between publish and mark, and every consumer suppresses the second copy', async () => {
    const reports: DeliveryReport[] = [];
    const consumers = SUBSCRIBERS.map((consumer) =>
      startConsumer({
        catalogue: shop,
        consumer,
        inbox: createInbox({ db: db.prisma }),
        handler: reserveOneUnit(consumer),
        prefix,
        onDelivery: (report) => reports.push(report),
      }),
    );
    try {
      const written = await writeOrders(5);
      const child = startScript(new URL('../test/relay-process.ts', import.meta.url), {
        DATABASE_URL: db.url,
        IDEM_PREFIX: prefix,
        IDEM_FAULTS_ENABLED: '1',
        IDEM_FAULTS: 'crash-after-publish count=1',
      });
      await printed(child, 'ready');
      expect(await exited(child)).toBe('SIGKILL');
      expect(await db.prisma.outboxMessage.count({ where: { publishedAt: null } })).toBe(5); // published, never marked

      const count = (outcome: string) => reports.filter((r) => r.outcome.outcome === outcome).length;
      await waitFor(() => count('processed') === 10, { what: 'the first copies' });

      // A healthy relay publishes the unmarked rows again: the accepted duplicate.
      const publisher = createPublisher({
        catalogue: shop,
        prefix,
        policy: { ...defaultDeliveryPolicy, keepCompletedMs: 0 },
      });
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
    for (const consumer of SUBSCRIBERS) expect(await queueCounts(consumer)).toMatchObject({ wait: 300 });
  });
});
