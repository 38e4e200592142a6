import { randomBytes } from 'node:crypto';
import { reachOf } from '@idem/shop';
import { createInbox, processed } from '@idem/inbox';
import {
  createTestDatabase,
  deleteQueues,
  orderPlacedMessage,
  redisUrl,
  testMessage,
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
import { asRedisUser } from './redis.js';
import {
  consoleRedisUser,
  deleteRedisUser,
  kedaRedisUser,
  rateLimitPrefix,
  redisUserOf,
  setRedisUser,
} from './redis-users.js';
import { journalKey } from './journal.js';
import { subscribersOf, subscriptionOf } from './subscriptions.js';
import { shop } from '@idem/shop';

const prefix = uniqueName('idem_test_acl');
const password = randomBytes(16).toString('hex');
const admin = new Redis(redisUrl);
const user = redisUserOf(`${prefix}-inventory`, { prefix, service: 'inventory', redisUrl, ...reachOf('inventory') });
/** The machine's Redis, as inventory's own user. */
const asInventory = asRedisUser(redisUrl, user.name, password);
let db: TestDatabase;

beforeAll(async () => {
  db = await createTestDatabase('acl');
  await setRedisUser(admin, user, password);
});
afterAll(async () => {
  await deleteRedisUser(admin, user.name);
  await deleteQueues(prefix);
  admin.disconnect();
  await db.drop();
});

describe("a service's Redis user", () => {
  it('subscribes, consumes its own queues and publishes its own contracts, through the real BullMQ scripts', async () => {
    const consumer = startConsumer({
      catalogue: shop,
      consumer: 'inventory.order-placed.v1',
      inbox: createInbox({ db: db.prisma }),
      handler: async () => processed,
      redisUrl: asInventory,
      prefix,
    });
    const orders = createPublisher({ catalogue: shop, redisUrl, prefix });
    const inventory = createPublisher({ catalogue: shop, redisUrl: asInventory, prefix });
    try {
      await consumer.ready;
      const placed = orderPlacedMessage();
      await orders.publish([placed]);
      await waitFor(async () => (await db.prisma.processedMessage.count()) === 1, { what: 'the delivery processed' });
      await inventory.publish([testMessage('inventory.stock-reserved.v1')]);
      expect(await orders.jobCounts('payments.stock-reserved.v1')).toMatchObject({ waiting: 1 });
    } finally {
      await consumer.close();
      await Promise.all([orders.close(), inventory.close()]);
    }
  });

  it('cannot publish a contract it does not produce, nor reach a queue it does not consume: no capture without payments', async () => {
    const inventory = createPublisher({ catalogue: shop, redisUrl: asInventory, prefix });
    const payments = createPublisher({ catalogue: shop, redisUrl, prefix });
    const redis = new Redis(asInventory, { maxRetriesPerRequest: 1 });
    try {
      await payments.publish([testMessage('payments.payment-captured.v1')]);
      const forged = testMessage('payments.payment-captured.v1');
      await expect(inventory.publish([forged])).rejects.toThrow(/NOPERM/);
      // Not even among orders' events, which it subscribes to: it reads their subscribers, and writes no queue of theirs.
      await expect(redis.del(`${prefix}:notifications.order-placed.v1:wait`)).rejects.toThrow(/NOPERM/);
      await expect(redis.del(`${prefix}:orders.payment-captured.v1:wait`)).rejects.toThrow(/NOPERM/);
      expect(await payments.jobCounts('orders.payment-captured.v1')).toMatchObject({ waiting: 1 });
    } finally {
      redis.disconnect();
      await Promise.all([inventory.close(), payments.close()]);
    }
  });

  it("writes its own journal and rate limits, and neither of another service's: no counter reset, no entry in its name", async () => {
    const redis = new Redis(asInventory, { maxRetriesPerRequest: 1 });
    try {
      await redis.xadd(journalKey(prefix, 'inventory'), '*', 'entry', '{}');
      await redis.set(`${rateLimitPrefix(prefix, 'inventory')}:address:10.0.0.1`, '1');
      await expect(redis.xadd(journalKey(prefix, 'payments'), '*', 'entry', '{}')).rejects.toThrow(/NOPERM/);
      await expect(redis.set(`${rateLimitPrefix(prefix, 'orders')}:customer:c1`, '0')).rejects.toThrow(/NOPERM/);
      await expect(redis.del(`${rateLimitPrefix(prefix, 'orders')}:address:10.0.0.1`)).rejects.toThrow(/NOPERM/);
    } finally {
      redis.disconnect();
      await admin.del(journalKey(prefix, 'inventory'), `${rateLimitPrefix(prefix, 'inventory')}:address:10.0.0.1`);
    }
  });
});

describe("a subscriber's Redis user", () => {
  const userOf = (service: 'notifications' | 'payments') =>
    redisUserOf(`${prefix}-${service}`, { prefix, service, redisUrl, ...reachOf(service) });
  const [notifications, payments] = [userOf('notifications'), userOf('payments')];
  const asNotifications = asRedisUser(redisUrl, notifications.name, password);
  const CONTRACT = 'payments.payment-captured.v1';
  const ORDERS = 'orders.payment-captured.v1';
  beforeAll(async () => {
    await setRedisUser(admin, notifications, password);
    await setRedisUser(admin, payments, password);
  });
  afterAll(async () => {
    await deleteRedisUser(admin, notifications.name);
    await deleteRedisUser(admin, payments.name);
  });

  it("reaches only its own subscription: another consumer's is not removed, redirected or emptied, and a name it adds silences nobody", async () => {
    const producer = createPublisher({
      catalogue: shop,
      redisUrl: asRedisUser(redisUrl, payments.name, password),
      prefix,
    });
    const delivered: string[] = [];
    const consumer = startConsumer({
      catalogue: shop,
      consumer: 'notifications.payment-captured.v1',
      inbox: createInbox({ db: db.prisma }),
      handler: async () => processed,
      onDelivery: (report) => delivered.push(report.messageId),
      redisUrl: asNotifications,
      prefix,
    });
    const redis = new Redis(asNotifications, { maxRetriesPerRequest: 1 });
    const orders = new Queue(ORDERS, { connection: admin, prefix });
    try {
      await consumer.ready;
      const subscribers = subscribersOf(prefix, CONTRACT);
      expect(await redis.smembers(subscribers)).toContain('notifications.payment-captured.v1'); // it reads them
      // Orders' subscription to payments' captures, as a stranger would silence or redirect it:
      await expect(redis.srem(subscribers, ORDERS)).rejects.toThrow(/NOPERM/);
      await expect(redis.del(subscribers)).rejects.toThrow(/NOPERM/);
      await expect(redis.set(subscriptionOf(prefix, ORDERS), '{}')).rejects.toThrow(/NOPERM/);
      await expect(redis.del(`${prefix}:${ORDERS}:wait`)).rejects.toThrow(/NOPERM/);
      // It can add a name — even one subscribed, that the producer may not deliver to — and stops
      // nobody's delivery with it.
      const subscription = { contracts: [CONTRACT], policy: defaultDeliveryPolicy };
      await admin.set(subscriptionOf(prefix, 'stranger.payment-captured.v1'), JSON.stringify(subscription));
      await redis.sadd(subscribers, 'stranger.payment-captured.v1');
      // Nor can it have the producer add jobs to queues it invents under its own keys.
      const invented = 'notifications.payment-captured.v1:1';
      await redis.set(subscriptionOf(prefix, invented), JSON.stringify(subscription));
      await redis.sadd(subscribers, invented);
      const captured = testMessage(CONTRACT);
      await producer.publish([captured]);
      await waitFor(() => delivered.includes(captured.messageId), { what: 'its own delivery' });
      expect(await orders.getJob(captured.messageId)).toBeDefined();
      expect(await admin.exists(`${prefix}:stranger.payment-captured.v1:${captured.messageId}`)).toBe(0);
      expect(await admin.exists(`${prefix}:${invented}:${captured.messageId}`)).toBe(0);
    } finally {
      redis.disconnect();
      await orders.close();
      await consumer.close();
      await producer.close();
    }
  });
});

describe("the console's Redis user", () => {
  const consoleUser = consoleRedisUser(`${prefix}-console`, { prefix });
  const consolePassword = randomBytes(16).toString('hex');

  it("reads the services' journals and nothing else of the system: no queue, no rate limit, no journal entry of its own, no FLUSHALL", async () => {
    await setRedisUser(admin, consoleUser, consolePassword);
    const asConsole = new Redis(asRedisUser(redisUrl, consoleUser.name, consolePassword), { maxRetriesPerRequest: 1 });
    try {
      await admin.xadd(journalKey(prefix, 'orders'), '*', 'entry', '{}');
      expect(await asConsole.call('ACL', 'WHOAMI')).toBe(consoleUser.name);
      expect(await asConsole.xrange(journalKey(prefix, 'orders'), '-', '+')).toHaveLength(1);
      await expect(asConsole.xadd(journalKey(prefix, 'orders'), '*', 'entry', '{}')).rejects.toThrow(/NOPERM/);
      await expect(asConsole.set(`${rateLimitPrefix(prefix, 'orders')}:someone`, '0')).rejects.toThrow(/NOPERM/);
      await expect(asConsole.get(`${prefix}:inventory.order-placed.v1:meta`)).rejects.toThrow(/NOPERM/);
      await expect(asConsole.flushall()).rejects.toThrow(/NOPERM/);
      // Its lessons' queues are its own.
      await asConsole.set(`idem_lesson_${prefix}:probe`, '1');
      await asConsole.del(`idem_lesson_${prefix}:probe`);
    } finally {
      asConsole.disconnect();
      await deleteRedisUser(admin, consoleUser.name);
      await admin.del(journalKey(prefix, 'orders'));
    }
  });
});

describe("KEDA's Redis user", () => {
  const queue = `${prefix}:payments.stock-reserved.v1`; // its wait list as BullMQ names it (below)
  const kedaUser = kedaRedisUser(`${prefix}-keda`, { waitLists: [`${queue}:wait`] });
  const kedaPassword = randomBytes(16).toString('hex');
  /** What KEDA's list scalers send each poll: one script that reads the key's type, then its length. */
  const LIST_LENGTH = `local listType = redis.call('type', KEYS[1]).ok
    if listType == 'list' or listType == 'none' then return redis.call('llen', KEYS[1]) end
    return redis.error_reply('ERR not a list: ' .. listType)`;

  it('reads the length of the wait lists it scales on and nothing else: no job, no other key, no write, no FLUSHALL', async () => {
    await setRedisUser(admin, kedaUser, kedaPassword);
    const queued = new Queue('payments.stock-reserved.v1', { prefix, connection: admin });
    const asKeda = new Redis(asRedisUser(redisUrl, kedaUser.name, kedaPassword), {
      maxRetriesPerRequest: 1,
      enableReadyCheck: false, // KEDA's client asks no INFO, and its user may not
    });
    try {
      await queued.add('probe', {});
      const [jobId] = await admin.lrange(`${queue}:wait`, 0, 0);
      const waiting = await admin.llen(`${queue}:wait`);
      expect(waiting).toBeGreaterThan(0);
      expect(await asKeda.ping()).toBe('PONG');
      expect(await asKeda.eval(LIST_LENGTH, 1, `${queue}:wait`)).toBe(waiting);
      expect(await asKeda.llen(`${queue}:wait`)).toBe(waiting);
      // The job, its list's entries, the queue's other keys: none.
      await expect(asKeda.hgetall(`${queue}:${jobId}`)).rejects.toThrow(/NOPERM/);
      await expect(asKeda.get(`${queue}:${jobId}`)).rejects.toThrow(/NOPERM/);
      await expect(asKeda.lrange(`${queue}:wait`, 0, -1)).rejects.toThrow(/NOPERM/);
      await expect(asKeda.llen(`${queue}:active`)).rejects.toThrow(/NOPERM/);
      await expect(asKeda.eval(LIST_LENGTH, 1, `${queue}:active`)).rejects.toThrow(/NOPERM|can't access/);
      // No write, in a script or not; nothing of the server's.
      await expect(asKeda.set(`${queue}:wait`, 'x')).rejects.toThrow(/NOPERM/);
      await expect(asKeda.eval("return redis.call('lpop', KEYS[1])", 1, `${queue}:wait`)).rejects.toThrow(
        /can't run this command/,
      );
      await expect(asKeda.flushall()).rejects.toThrow(/NOPERM/);
      await expect(asKeda.config('GET', 'maxmemory')).rejects.toThrow(/NOPERM/);
      expect(await admin.llen(`${queue}:wait`)).toBe(waiting);
    } finally {
      asKeda.disconnect();
      await queued.close();
      await deleteRedisUser(admin, kedaUser.name);
    }
  });
});
