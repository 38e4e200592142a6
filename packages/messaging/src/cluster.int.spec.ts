import { randomInt, randomUUID } from 'node:crypto';
import { exampleBodies, subscriptions, type EventType } from '@idem/shop';
import { createFaults, parseFaultRules } from '@idem/faults';
import { createInbox } from '@idem/inbox';
import {
  createTestDatabase,
  publishUntilAccepted,
  startRedisCluster,
  testMessage,
  uniqueName,
  waitFor,
  type RedisCluster,
  type TestDatabase,
} from '@idem/testkit';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reserveOneUnit } from '../test/fixtures.js';
import { startConsumer, type DeliveryReport } from './consumer.js';
import { NotDurableError } from './durability.js';
import { createDeliveryJournal, deliveryEntry, readJournal } from './journal.js';
import { createPublisher } from './publisher.js';
import { connectRedis, queueName } from './redis.js';
import { shop } from '@idem/shop';

/**
 * The messaging layer on a Redis Cluster of the test's own: three masters, each with a replica,
 * from the machine's redis-server, on loopback ports.
 */
const CONSUMER = 'inventory.order-placed.v1';
const prefix = uniqueName('idem_test_cluster');
let cluster: RedisCluster;
let db: TestDatabase;

beforeAll(async () => {
  // Six ports a cluster (bus ports 500 above). This file runs in two projects at once (int,
  // bullmq-as-published), each in a worker slot of its own: random starts overlapped now and then,
  // and one cluster's nodes joined the other's. A slot's own six ports never overlap another's.
  const slot = Number(process.env.VITEST_POOL_ID ?? randomInt(1, 15));
  cluster = await startRedisCluster({ firstPort: 31_000 + (slot % 15) * 6 });
  db = await createTestDatabase('cluster');
  await db.prisma.stockItem.create({ data: { sku: CONSUMER, available: 100 } });
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
  await db?.drop();
});

describe('on a Redis Cluster', () => {
  it("keeps each queue's keys in a slot of its own, so the queues spread over every master", async () => {
    const publisher = createPublisher({ catalogue: shop, redisUrl: cluster.url, prefix });
    try {
      const types = Object.keys(subscriptions) as EventType[];
      await publishUntilAccepted(
        () => publisher.publish(types.map((type) => testMessage(type))),
        'the cluster to take a publication',
      );
      // The subscribers of each contract, one key wherever its name hashes (the prefix is random,
      // so which master holds which is not asserted).
      const perMaster = await cluster.keysPerMaster(`${prefix}:subscribers:*`);
      expect(Object.values(perMaster).reduce((a, b) => a + b, 0)).toBe(types.length);
      const queues = new Set(types.flatMap((type) => subscriptions[type]));
      expect(queues.size).toBe(15);
      // Every key of one queue in one slot, the consumer's hash tag's (what BullMQ's scripts
      // need), whatever the prefix: the queues spread over every master.
      const masters = new Set<number>();
      for (const consumer of queues) {
        expect(queueName(consumer, cluster.url)).toBe(`{${consumer}}`);
        const { master } = await cluster.roleOf(`${prefix}:{${consumer}}:id`);
        const { master: waitList } = await cluster.roleOf(`${prefix}:{${consumer}}:wait`);
        expect(waitList.port).toBe(master.port);
        masters.add(master.port);
      }
      expect(masters.size).toBe(3);
    } finally {
      await publisher.close();
    }
  });

  it('delivers through the inbox, which suppresses the copy publish-twice sends, and journals it', async () => {
    const faults = createFaults(parseFaultRules('publish-twice target=publisher count=1'));
    const publisher = createPublisher({ catalogue: shop, redisUrl: cluster.url, prefix, faults });
    const redis = connectRedis(cluster.url);
    const journal = createDeliveryJournal({ redis, prefix, service: 'inventory' });
    const reports: DeliveryReport[] = [];
    const consumer = startConsumer({
      catalogue: shop,
      consumer: CONSUMER,
      redisUrl: cluster.url,
      prefix,
      inbox: createInbox({ db: db.prisma }),
      handler: reserveOneUnit(CONSUMER),
      onDelivery: (report) => {
        reports.push(report);
        journal.record(deliveryEntry(report, 'test'));
      },
    });
    try {
      const message = testMessage('orders.order-placed.v1', {
        body: { orderId: randomUUID(), lines: [{ sku: CONSUMER, quantity: 1, unitPriceCents: 100 }] },
      });
      await publishUntilAccepted(() => publisher.publish([message]), 'the publication');
      const copies = () => reports.filter((r) => r.messageId === message.messageId);
      await waitFor(() => copies().length >= 2, { what: 'both copies delivered' });
      expect(
        copies()
          .map((r) => r.outcome.outcome)
          .sort(),
      ).toEqual(['duplicate', 'processed']);
      expect(await db.prisma.reservation.count({ where: { orderId: message.body.orderId } })).toBe(1);
      await waitFor(async () => (await readJournal(redis, prefix, ['inventory'])).entries.length >= 2, {
        what: 'the journal entries',
      });
    } finally {
      await consumer.close(1000);
      await journal.close();
      await publisher.close();
      redis.disconnect();
    }
  });

  it('confirms a publication on the replica of the master that took it, and refuses it while that replica is stopped', async () => {
    const publisher = createPublisher({ catalogue: shop, redisUrl: cluster.url, prefix, durabilityTimeoutMs: 300 });
    const { replica } = await cluster.roleOf(`${prefix}:{${CONSUMER}}:id`);
    try {
      const placed = () => testMessage('orders.order-placed.v1', { body: exampleBodies['orders.order-placed.v1'] });
      await publishUntilAccepted(() => publisher.publish([placed()]), 'a first publication');
      expect(await publisher.durability()).toBe('replica');
      replica!.process.kill('SIGSTOP');
      // order-placed goes to the consumer's queue, whose master's replica is stopped: not confirmed.
      await expect(publisher.publish([placed()])).rejects.toBeInstanceOf(NotDurableError);
      replica!.process.kill('SIGCONT');
      await publishUntilAccepted(() => publisher.publish([placed()]), 'a confirmed publication');
    } finally {
      replica!.process.kill('SIGCONT');
      await publisher.close();
    }
  });

  it('loses a publication its master acknowledged and died with before its replica had it, unless the publication waited for the replica', async () => {
    // The failure window, made to happen: the replica lags (stopped, its link cut); the master
    // takes a job and is killed; the replica, continued, is promoted without it.
    const lost = async (durability: 'none' | 'replica') => {
      const publisher = createPublisher({
        catalogue: shop,
        redisUrl: cluster.url,
        prefix,
        durability,
        durabilityTimeoutMs: 300,
      });
      const message = testMessage('orders.order-placed.v1', { body: { orderId: randomUUID() } });
      const queue = `${prefix}:{${CONSUMER}}:id`; // the consumer's queue, in its slot
      try {
        await publishUntilAccepted(
          () => publisher.publish([testMessage('orders.order-placed.v1')]),
          'the publisher to reach the cluster',
        );
        const { master, replica } = await cluster.roleOf(queue);
        // The replica stopped, and its link cut, so it can neither read nor reconnect.
        replica!.process.kill('SIGSTOP');
        const direct = new Redis({ host: '127.0.0.1', port: master.port });
        await direct.client('KILL', 'TYPE', 'replica');
        direct.disconnect();
        const published = await publisher.publish([message]).then(
          () => 'published',
          (error: unknown) => (error instanceof NotDurableError ? 'not durable' : String(error)),
        );
        await cluster.kill(master);
        replica!.process.kill('SIGCONT');
        await waitFor(async () => (await cluster.roleOf(queue).catch(() => undefined))?.master === replica, {
          timeoutMs: 30_000,
          what: 'the replica promoted',
        });
        await cluster.restart(master); // back as the new master's replica, for what follows
        const redis = connectRedis(cluster.url);
        try {
          const job = `${prefix}:{${CONSUMER}}:${message.messageId}`;
          return { published, kept: (await redis.exists(job)) === 1 };
        } finally {
          redis.disconnect();
        }
      } finally {
        await publisher.close();
      }
    };
    // Marked as published (the relay would never send it again) and gone: an order stuck for good.
    expect(await lost('none')).toEqual({ published: 'published', kept: false });
    // Refused instead: the relay keeps the row and publishes it again, to the promoted replica.
    expect(await lost('replica')).toEqual({ published: 'not durable', kept: false });
  }, 120_000);
});
