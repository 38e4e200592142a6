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
import { MOST_SUBSCRIBERS, subscribeConsumer, subscribersOf, subscriptionOf } from './subscriptions.js';

const CONSUMER = 'inventory.order-placed.v1';
const CONTRACT = 'orders.order-placed.v1';
const prefixes: string[] = [];
/** A prefix of the test's own: its subscribers and queues. */
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
  it("adds each publication under the consumer's own delivery policy, never the producer's", async () => {
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
    const producer = createPublisher({ catalogue: shop, prefix, policy: { ...defaultDeliveryPolicy, attempts: 1 } });
    const queue = new Queue(CONSUMER, { connection: admin, prefix });
    try {
      await consumer.ready;
      const published = orderPlacedMessage();
      await producer.publish([published]);
      await waitFor(() => delivered.includes(published.messageId), { what: 'the delivery' });
      expect((await queue.getJob(published.messageId))?.opts).toMatchObject({
        jobId: published.messageId,
        attempts: own.attempts,
        backoff: { type: 'exponential', delay: own.backoffDelayMs },
        removeOnComplete: { age: own.keepCompletedMs / 1000 },
        removeOnFail: { age: own.keepFailedMs / 1000 },
      });
    } finally {
      await consumer.close(1000);
      await producer.close();
      await queue.close();
    }
  });

  it("adds under the producer's policy for a consumer that wrote none, or one that is no policy", async () => {
    const prefix = fresh();
    const policy = { ...defaultDeliveryPolicy, attempts: 2 };
    const producer = createPublisher({ catalogue: shop, prefix, policy });
    const queue = new Queue(CONSUMER, { connection: admin, prefix });
    try {
      const notAPolicy = { attempts: 0, backoffDelayMs: 'soon' };
      await admin.set(subscriptionOf(prefix, CONSUMER), JSON.stringify({ contracts: [CONTRACT], policy: notAPolicy }));
      const published = orderPlacedMessage();
      await producer.publish([published]);
      expect((await queue.getJob(published.messageId))?.opts).toMatchObject({ attempts: 2 });
    } finally {
      await producer.close();
      await queue.close();
    }
  });

  it('is one hop: a publication waits in the queue of each subscriber once it resolves, none of them running yet', async () => {
    const prefix = fresh();
    const producer = createPublisher({ catalogue: shop, prefix });
    const queues = shop.contracts[CONTRACT].consumers.map((name) => new Queue(name, { connection: admin, prefix }));
    const reports: DeliveryReport[] = [];
    try {
      // The producer first: the catalogue's consumers are subscribed before its first publication.
      const published = orderPlacedMessage();
      await producer.publish([published]);
      for (const queue of queues) expect(await queue.getJob(published.messageId)).toBeDefined();
      expect((await admin.smembers(subscribersOf(prefix, CONTRACT))).sort()).toEqual(
        [...shop.contracts[CONTRACT].consumers].sort(),
      );
      const consumer = instance(prefix, reports); // started after the producer
      try {
        await waitFor(() => reports.some((r) => r.messageId === published.messageId), {
          what: 'what was published before the consumer started',
        });
      } finally {
        await consumer.close(1000);
      }
    } finally {
      await producer.close();
      await Promise.all(queues.map((queue) => queue.close()));
    }
  });

  it("survives its subscribers being lost (deleted, or gone with a failover): the catalogue's still receive, a self-subscribed one once it subscribes again", async () => {
    const prefix = fresh();
    const producer = createPublisher({ catalogue: shop, prefix });
    const named = new Queue(CONSUMER, { connection: admin, prefix });
    const STRANGER = 'audit.order-placed.v1';
    const stranger = new Queue(STRANGER, { connection: admin, prefix });
    try {
      await producer.publish([orderPlacedMessage()]);
      // A consumer outside the producer's catalogue, subscribed as subscribeConsumer would.
      const subscription = { contracts: [CONTRACT], policy: defaultDeliveryPolicy };
      await admin.set(subscriptionOf(prefix, STRANGER), JSON.stringify(subscription));
      await admin.sadd(subscribersOf(prefix, CONTRACT), STRANGER);
      await admin.del(subscribersOf(prefix, CONTRACT));
      const after = orderPlacedMessage();
      await producer.publish([after]);
      expect(await named.getJob(after.messageId)).toBeDefined();
      expect(await stranger.getJob(after.messageId)).toBeUndefined(); // lost with the key, until it subscribes again
      await admin.sadd(subscribersOf(prefix, CONTRACT), STRANGER);
      const next = orderPlacedMessage();
      await producer.publish([next]);
      expect(await stranger.getJob(next.messageId)).toBeDefined();
    } finally {
      await producer.close();
      await Promise.all([named.close(), stranger.close()]);
    }
  });

  it("delivers to a name another added only where that consumer's own subscription takes the contract", async () => {
    const prefix = fresh();
    const OTHER = 'payments.stock-reserved.v1'; // subscribed, to another contract
    await subscribeConsumer({ catalogue: shop, consumer: OTHER, prefix });
    const producer = createPublisher({ catalogue: shop, prefix });
    const other = new Queue(OTHER, { connection: admin, prefix });
    try {
      await admin.sadd(subscribersOf(prefix, CONTRACT), OTHER, 'nobody.order-placed.v1');
      const published = orderPlacedMessage();
      await producer.publish([published]);
      expect(await other.getJob(published.messageId)).toBeUndefined();
      expect(await admin.exists(`${prefix}:nobody.order-placed.v1:${published.messageId}`)).toBe(0);
      expect(await admin.exists(`${prefix}:${CONSUMER}:${published.messageId}`)).toBe(1);
    } finally {
      await producer.close();
      await other.close();
    }
  });

  it("takes only consumers' names: one with a ':' reaches no queue under another's keys", async () => {
    const prefix = fresh();
    const producer = createPublisher({ catalogue: shop, prefix });
    try {
      // As a subscriber could write them in its own keys, a queue under its queue's name.
      const invented = `${CONSUMER}:1`;
      const subscription = { contracts: [CONTRACT], policy: defaultDeliveryPolicy };
      await admin.set(subscriptionOf(prefix, invented), JSON.stringify(subscription));
      await admin.sadd(subscribersOf(prefix, CONTRACT), invented);
      const published = orderPlacedMessage();
      await producer.publish([published]);
      expect(await admin.exists(`${prefix}:${CONSUMER}:${published.messageId}`)).toBe(1);
      expect(await admin.exists(`${prefix}:${invented}:${published.messageId}`)).toBe(0);
    } finally {
      await producer.close();
    }
  });

  it('leaves out a self-subscribed name whose queue or subscription Redis refuses, and delivers to everyone else', async () => {
    const prefix = fresh();
    const producer = createPublisher({ catalogue: shop, prefix });
    const [broken, unreadable, whole] = [
      'broken.order-placed.v1',
      'unreadable.order-placed.v1',
      'audit.order-placed.v1',
    ];
    const subscription = JSON.stringify({ contracts: [CONTRACT], policy: defaultDeliveryPolicy });
    try {
      await admin.set(subscriptionOf(prefix, broken), subscription);
      await admin.set(`${prefix}:${broken}:events`, 'not a stream'); // BullMQ's add writes its events
      await admin.sadd(subscriptionOf(prefix, unreadable), 'not a subscription');
      await admin.set(subscriptionOf(prefix, whole), subscription);
      await admin.sadd(subscribersOf(prefix, CONTRACT), broken, unreadable, whole);
      const published = orderPlacedMessage();
      await producer.publish([published]);
      for (const reached of [CONSUMER, whole])
        expect(await admin.exists(`${prefix}:${reached}:${published.messageId}`)).toBe(1);
      // The broken queue's script failed part way (Redis undoes none of it); the publication stood.
      expect(await admin.exists(`${prefix}:${unreadable}:${published.messageId}`)).toBe(0);
    } finally {
      await producer.close();
    }
  });

  it('reads no more than MOST_SUBSCRIBERS names of a contract: past them it keeps the subscribers it knew, and takes new ones once the names are removed', async () => {
    const prefix = fresh();
    const producer = createPublisher({ catalogue: shop, prefix });
    const [known, late] = ['audit.order-placed.v1', 'late.order-placed.v1'];
    const subscription = JSON.stringify({ contracts: [CONTRACT], policy: defaultDeliveryPolicy });
    const reached = async (consumer: string) => {
      const published = orderPlacedMessage();
      await producer.publish([published]);
      return (await admin.exists(`${prefix}:${consumer}:${published.messageId}`)) === 1;
    };
    try {
      await admin.set(subscriptionOf(prefix, known), subscription);
      await admin.sadd(subscribersOf(prefix, CONTRACT), known);
      expect(await reached(known)).toBe(true);
      // Names by the thousand, as a subscriber may add them: each a consumer's, subscribed to nothing.
      const names = Array.from({ length: 4 * MOST_SUBSCRIBERS }, (_, i) => `flood.name-${i}`);
      await admin.sadd(subscribersOf(prefix, CONTRACT), ...names);
      await admin.set(subscriptionOf(prefix, late), subscription);
      await admin.sadd(subscribersOf(prefix, CONTRACT), late);
      expect(await reached(known)).toBe(true);
      expect(await reached(CONSUMER)).toBe(true);
      expect(await reached(late)).toBe(false);
      await admin.srem(subscribersOf(prefix, CONTRACT), ...names);
      expect(await reached(late)).toBe(true);
    } finally {
      await producer.close();
    }
  });

  it('says which of its contracts nobody has declared yet', async () => {
    const prefix = fresh();
    expect(await subscribeConsumer({ catalogue: shop, consumer: CONSUMER, prefix })).toEqual([CONTRACT]);
    expect(await subscribeConsumer({ catalogue: shop, consumer: CONSUMER, prefix })).toEqual([]);
  });
});
