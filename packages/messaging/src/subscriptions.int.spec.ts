import { createInbox, processed } from '@idem/inbox';
import type { DeliveryReport } from '@idem/transport';
import { shop } from '@idem/shop';
import {
  createTestDatabase,
  deleteQueues,
  orderPlacedMessage,
  redisUrl,
  uniqueName,
  waitFor,
  type TestDatabase,
} from '@idem/testkit';
import { defaultDeliveryPolicy } from '@idem/transport';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startConsumer } from './consumer.js';
import { createPublisher } from './publisher.js';
import { leaseOf, positionOf, streamOf, subscribeConsumer, subscribersOf, trimStream } from './subscriptions.js';

const CONSUMER = 'inventory.order-placed.v1';
const CONTRACT = 'orders.order-placed.v1';
const prefixes: string[] = [];
/** A prefix of the test's own: its stream, subscribers, positions and queue. */
const fresh = () => {
  prefixes.push(uniqueName('idem_test_subscriptions'));
  return prefixes.at(-1)!;
};
const admin = new Redis(redisUrl);
let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('subscriptions');
});
afterAll(async () => {
  await Promise.all(prefixes.map(deleteQueues));
  admin.disconnect();
  await db.drop();
});

/** An instance of the consumer under `prefix`, each delivery reported. */
const instance = (prefix: string, reports: DeliveryReport[]) =>
  startConsumer({
    catalogue: shop,
    consumer: CONSUMER,
    inbox: createInbox({ db: db.prisma }),
    handler: async () => processed,
    onDelivery: (report) => reports.push(report),
    prefix,
  });

describe('a subscription', () => {
  it("adds what it forwards under the consumer's own delivery policy, never the job options a producer wrote", async () => {
    const prefix = fresh();
    const own = { attempts: 3, backoffDelayMs: 50, keepCompletedMs: 60_000, keepFailedMs: 120_000 };
    const delivered: string[] = [];
    const consumer = startConsumer({
      catalogue: shop,
      consumer: CONSUMER,
      inbox: createInbox({ db: db.prisma }),
      handler: async () => processed,
      onDelivery: (report) => delivered.push(report.messageId),
      policy: own,
      prefix,
    });
    // A producer with a policy of its own, and one that writes job options into its stream as it likes.
    const producer = createPublisher({ catalogue: shop, prefix, policy: { ...defaultDeliveryPolicy, attempts: 1 } });
    const queue = new Queue(CONSUMER, { connection: admin, prefix });
    try {
      await consumer.ready;
      const published = orderPlacedMessage();
      await producer.publish([published]);
      const hostile = orderPlacedMessage();
      const tenYears = 10 * 365 * 24 * 3_600_000;
      await admin.xadd(
        streamOf(prefix, CONTRACT),
        '*',
        'job',
        JSON.stringify({ jobId: hostile.messageId, delay: tenYears, attempts: 0, removeOnComplete: true }),
        'envelope',
        JSON.stringify(hostile),
      );
      await waitFor(() => delivered.includes(published.messageId) && delivered.includes(hostile.messageId), {
        what: 'both delivered, at once',
      });
      for (const { messageId } of [published, hostile])
        expect((await queue.getJob(messageId))?.opts).toMatchObject({
          jobId: messageId,
          attempts: own.attempts,
          backoff: { type: 'exponential', delay: own.backoffDelayMs },
          removeOnComplete: { age: own.keepCompletedMs / 1000 },
          removeOnFail: { age: own.keepFailedMs / 1000 },
        });
      expect((await queue.getJob(hostile.messageId))?.opts.delay ?? 0).toBe(0);
    } finally {
      await consumer.close(1000);
      await producer.close();
      await queue.close();
    }
  });

  it('is forwarded by one instance at a time, and by another at once when that one stops', async () => {
    const prefix = fresh();
    const lease = leaseOf(prefix, CONTRACT, CONSUMER);
    const reports: DeliveryReport[] = [];
    const first = instance(prefix, reports);
    await first.ready;
    await waitFor(() => admin.get(lease), { what: 'the first instance holding the lease' });
    const second = instance(prefix, reports);
    const producer = createPublisher({ catalogue: shop, prefix });
    try {
      await second.ready;
      const messages = Array.from({ length: 20 }, () => orderPlacedMessage());
      for (const message of messages) await producer.publish([message]);
      await waitFor(() => reports.length === messages.length, { what: 'each message delivered' });
      // Each entry was added once: the second instance forwarding it too would have met its job.
      const events = await admin.xrange(`${prefix}:${CONSUMER}:events`, '-', '+');
      expect(events.filter(([, fields]) => fields.includes('duplicated'))).toEqual([]);
      // The first stops and gives the lease up: the second takes over at the next entry, not once
      // the lease (30 s) would have expired.
      await first.close(1000);
      expect(await admin.get(lease)).toBeNull();
      const next = orderPlacedMessage();
      await producer.publish([next]);
      await waitFor(() => reports.some((report) => report.messageId === next.messageId), {
        timeoutMs: 10_000,
        what: 'the next message, forwarded by the second instance',
      });
    } finally {
      await Promise.all([first.close(1000), second.close(1000)]);
      await producer.close();
    }
  });

  it('resumes from the first entry kept when its position was lost, skipping nothing', async () => {
    const prefix = fresh();
    const producer = createPublisher({ catalogue: shop, prefix });
    const reports: DeliveryReport[] = [];
    try {
      await subscribeConsumer({ catalogue: shop, consumer: CONSUMER, prefix });
      const missed = [orderPlacedMessage(), orderPlacedMessage()];
      await producer.publish(missed);
      await admin.del(positionOf(prefix, CONTRACT, CONSUMER)); // removed, or gone with a failover
      const consumer = instance(prefix, reports);
      try {
        await waitFor(() => missed.every(({ messageId }) => reports.some((r) => r.messageId === messageId)), {
          what: 'what was published before the position was lost',
        });
      } finally {
        await consumer.close(1000);
      }
    } finally {
      await producer.close();
    }
  });
});

describe("a producer's stream", () => {
  it('is trimmed to the oldest position of its subscribers, and keeps the last minute', async () => {
    const prefix = fresh();
    const stream = streamOf(prefix, CONTRACT);
    const at = (id: string) => ({
      position: (consumer: string) => admin.hset(positionOf(prefix, CONTRACT, consumer), 'id', id),
    });
    const old = Date.now() - 10 * 60_000;
    const ids = [0, 1, 2].map((i) => `${old + i * 1000}-0`);
    for (const id of ids) await admin.xadd(stream, id, 'envelope', '{}');
    const recent = (await admin.xadd(stream, '*', 'envelope', '{}'))!;
    // A name without a position (only added to the subscribers) holds nothing.
    await admin.sadd(subscribersOf(prefix, CONTRACT), 'a', 'b', 'a-name-alone');
    await at(ids[1]!).position('a');
    await at(ids[2]!).position('b');
    const kept = async () => (await admin.xrange(stream, '-', '+')).map(([id]) => id);
    await trimStream(admin, prefix, CONTRACT);
    expect(await kept()).toEqual([ids[1], ids[2], recent]);
    await at(recent).position('a');
    await at(recent).position('b');
    await trimStream(admin, prefix, CONTRACT);
    expect(await kept()).toEqual([recent]);
  });
});
