import type { Envelope, Shop } from '@idem/shop';
import { createFaults, parseFaultRules } from '@idem/faults';
import { createInbox, permanentFailure } from '@idem/inbox';
import {
  createTestDatabase,
  deleteQueues,
  orderPlacedMessage,
  redisUrl,
  uniqueName,
  waitFor,
  type TestDatabase,
  exited,
  printed,
  startScript,
  startNetworkPath,
} from '@idem/testkit';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { HOLDING_SKU, KEEP_NOTHING, reserveOneUnit, type Tx } from '../test/fixtures.js';
import { startConsumer, type Consumer, type ConsumerOptions, type DeliveryReport } from './consumer.js';
import { createPublisher, type Publisher } from './publisher.js';
import { createDeliveryJournal, deliveryEntry, readJournal } from './journal.js';
import { replayDeadLetters, ReplayWindowError } from '@idem/transport';
import { shop } from '@idem/shop';

const CONSUMER = 'inventory.order-placed.v1';
const prefix = uniqueName('idem_test_consumer');
let db: TestDatabase;
let publisher: Publisher;
let queue: Queue;
let reports: DeliveryReport[];
const running: Consumer[] = [];

beforeAll(async () => {
  db = await createTestDatabase('consumer');
  publisher = createPublisher({ catalogue: shop, prefix, policy: KEEP_NOTHING });
  queue = new Queue(CONSUMER, { connection: new Redis(redisUrl, { maxRetriesPerRequest: null }), prefix });
});

afterAll(async () => {
  await publisher.close();
  await queue.close();
  await deleteQueues(prefix);
  await db.drop();
});

beforeEach(async () => {
  reports = [];
  await db.prisma.$executeRaw`TRUNCATE processed_messages, dead_letters, stock_items, reservations`;
  await db.prisma.stockItem.create({ data: { sku: CONSUMER, available: 100 } });
});

afterEach(async () => {
  await Promise.all(running.splice(0).map((c) => c.close(1000)));
  await queue.drain(true);
});

function start(overrides: Partial<ConsumerOptions<Tx, Shop, typeof CONSUMER>> = {}): Consumer {
  const consumer = startConsumer({
    catalogue: shop,
    consumer: CONSUMER,
    inbox: createInbox({ db: db.prisma }),
    handler: reserveOneUnit(CONSUMER),
    prefix,
    lockDurationMs: 1000,
    stalledIntervalMs: 300,
    policy: KEEP_NOTHING,
    onDelivery: (report) => reports.push(report),
    ...overrides,
  });
  running.push(consumer);
  return consumer;
}

const outcomesOf = (messageId: string) =>
  reports.filter((r) => r.messageId === messageId).map((r) => r.outcome.outcome);
const available = async () => (await db.prisma.stockItem.findUniqueOrThrow({ where: { sku: CONSUMER } })).available;
const waitForOutcomes = (messageId: string, count: number) =>
  waitFor(() => outcomesOf(messageId).length >= count && outcomesOf(messageId), {
    what: `${count} deliveries of ${messageId}`,
  });

/** A consumer in its own process that SIGKILLs itself after its first commit that processed something. */
async function startCrashingConsumer() {
  const child = startScript(new URL('../test/consumer-process.ts', import.meta.url), {
    DATABASE_URL: db.url,
    IDEM_PREFIX: prefix,
    IDEM_FAULTS_ENABLED: '1',
    IDEM_FAULTS: `crash-after-commit consumer=${CONSUMER} count=1`,
  });
  await printed(child, 'ready');
  return child;
}

describe('startConsumer', () => {
  it('processes a message once and completes its redelivery as a duplicate', async () => {
    start();
    const message = orderPlacedMessage();
    await publisher.publish([message]);
    await waitForOutcomes(message.messageId, 1);
    await publisher.publish([message]);
    expect(await waitForOutcomes(message.messageId, 2)).toEqual(['processed', 'duplicate']);
    expect(await available()).toBe(99);
  });

  it('absorbs the publish-twice fault: the second copy passes BullMQ’s dedupe and the inbox suppresses it', async () => {
    start();
    const twice = createPublisher({ catalogue: shop, prefix, faults: createFaults(parseFaultRules('publish-twice')) });
    try {
      const message = orderPlacedMessage();
      await twice.publish([message]);
      expect((await waitForOutcomes(message.messageId, 2)).sort()).toEqual(['duplicate', 'processed']);
      expect(await available()).toBe(99);
    } finally {
      await twice.close();
    }
  });

  it('gives one business change when two instances receive the same message at once', async () => {
    const slowReserve = async (message: Envelope<'orders.order-placed.v1'>, tx: Tx) => {
      await new Promise((resolve) => setTimeout(resolve, 300));
      return reserveOneUnit(CONSUMER)(message, tx);
    };
    // Two instances, each with its own database pool, competing on one queue.
    for (const client of [db.connect(), db.connect()]) {
      start({ inbox: createInbox({ db: client }), handler: slowReserve, concurrency: 1 });
    }
    const message = orderPlacedMessage();
    // Two copies in flight at once, as after a relay republished a message whose job was gone.
    await queue.addBulk(
      [1, 2].map((copy) => ({ name: message.type, data: message, opts: { jobId: `${message.messageId}-${copy}` } })),
    );

    expect((await waitForOutcomes(message.messageId, 2)).sort()).toEqual(['duplicate', 'processed']);
    expect(await available()).toBe(99);
    expect(await db.prisma.processedMessage.count()).toBe(1);
    expect(await queue.getJobCounts('completed', 'failed', 'active', 'wait')).toMatchObject({
      failed: 0,
      active: 0,
      wait: 0,
    });
  });

  it('redelivers after a consumer is SIGKILLed between commit and settlement, and the redelivery is a duplicate', async () => {
    const child = await startCrashingConsumer();
    const message = orderPlacedMessage();
    await publisher.publish([message]);

    expect(await exited(child)).toBe('SIGKILL');
    // The commit happened before the crash: the effect and the record are there, unsettled.
    expect(await available()).toBe(99);
    expect(await queue.getJobState(message.messageId)).toBe('active');

    start(); // another instance takes the delivery over once the dead one's lock expires
    expect(await waitForOutcomes(message.messageId, 1)).toEqual(['duplicate']);
    expect(await available()).toBe(99);
    expect(await db.prisma.processedMessage.count()).toBe(1);
  });

  it('retries a delivery whose transaction was forced to roll back and processes it then', async () => {
    const faults = createFaults(parseFaultRules(`rollback-after-handler consumer=${CONSUMER} count=1`));
    start({ inbox: createInbox({ db: db.prisma, faults }) });
    const message = orderPlacedMessage();
    await publisher.publish([message]);
    expect(await waitForOutcomes(message.messageId, 2)).toEqual(['transient_failure', 'processed']);
    expect(await available()).toBe(99);
  });

  it('retries after the database connection is killed mid-transaction and applies the change once', async () => {
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    let killed = false;
    start({
      handler: async (message, tx) => {
        if (!killed) {
          killed = true;
          const [own] = await tx.$queryRaw<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
          await admin.query('SELECT pg_terminate_backend($1)', [own!.pid]);
        }
        return reserveOneUnit(CONSUMER)(message, tx);
      },
    });
    try {
      const message = orderPlacedMessage();
      await publisher.publish([message]);
      expect(await waitForOutcomes(message.messageId, 2)).toEqual(['transient_failure', 'processed']);
      expect(reports[0]!.outcome).toMatchObject({ code: 'database_unavailable' });
      expect(await available()).toBe(99);
      expect(await db.prisma.processedMessage.count()).toBe(1);
    } finally {
      await admin.end();
    }
  });

  it('dead-letters a malformed envelope and an unknown version with a bounded reason and keeps serving', async () => {
    start();
    const unsupported = orderPlacedMessage({ type: 'orders.order-placed.v9' as 'orders.order-placed.v1' });
    await queue.add('garbage', { hello: 'x'.repeat(2000) }, { jobId: 'garbage-1', attempts: 3 });
    await queue.add(unsupported.type, unsupported, { jobId: unsupported.messageId, attempts: 3 });
    const valid = orderPlacedMessage();
    await publisher.publish([valid]);

    await waitForOutcomes(valid.messageId, 1);
    const deadLetters = await waitFor(async () => {
      const list = await db.prisma.deadLetter.findMany({ orderBy: { code: 'asc' } });
      return list.length === 2 && list;
    });
    expect(deadLetters.map((d) => [d.messageId, d.code, d.attempts])).toEqual([
      ['garbage-1', 'malformed_envelope', 1],
      [unsupported.messageId, 'unsupported_version', 1],
    ]);
    expect(deadLetters.every((d) => d.reason.length <= 500 && d.reason.length > 0)).toBe(true);
    expect(deadLetters[0]!.payload).toEqual({ hello: 'x'.repeat(2000) });
    expect(await db.prisma.processedMessage.findMany({ select: { messageId: true } })).toEqual([
      { messageId: valid.messageId },
    ]);
    expect(await queue.getJobState('garbage-1')).toBe('failed');
    expect(outcomesOf(valid.messageId)).toEqual(['processed']);
  });

  it('dead-letters a message that keeps failing, replays it after the fix, and suppresses a replay of what was processed', async () => {
    await db.prisma.stockItem.deleteMany(); // the handler's stock row is missing: every attempt fails
    start();
    const message = orderPlacedMessage();
    await publisher.publish([message]);
    const [deadLetter] = await waitFor(async () => {
      const list = await db.prisma.deadLetter.findMany();
      return list.length === 1 && list;
    });
    expect(deadLetter).toMatchObject({ code: 'retries_exhausted', attempts: 3 });
    expect(outcomesOf(message.messageId)).toEqual(['transient_failure', 'transient_failure', 'transient_failure']);
    expect(await db.prisma.processedMessage.count()).toBe(0);

    await db.prisma.stockItem.create({ data: { sku: CONSUMER, available: 100 } }); // the fix
    const inbox = createInbox({ db: db.prisma });
    expect(await replayDeadLetters(inbox.deadLetters, publisher, { consumer: CONSUMER })).toHaveLength(1);
    await waitForOutcomes(message.messageId, 4);
    expect(outcomesOf(message.messageId).at(-1)).toBe('processed');
    expect(await inbox.deadLetters.list()).toEqual([]);

    // A dead letter of a message that was, after all, processed: its replay changes nothing.
    await inbox.deadLetters.record({
      consumer: CONSUMER,
      messageId: message.messageId,
      payload: message,
      code: 'x',
      reason: 'x',
      attempts: 1,
    });
    await replayDeadLetters(inbox.deadLetters, publisher);
    await waitForOutcomes(message.messageId, 5);
    expect(outcomesOf(message.messageId).at(-1)).toBe('duplicate');
    expect(await available()).toBe(99);
  });

  it('finishes an in-flight delivery before closing', async () => {
    let started = false;
    const consumer = start({
      handler: async (message, tx) => {
        started = true;
        await new Promise((resolve) => setTimeout(resolve, 500));
        return reserveOneUnit(CONSUMER)(message, tx);
      },
    });
    const message = orderPlacedMessage();
    await publisher.publish([message]);
    await waitFor(() => started);
    await consumer.close(5000);
    expect(outcomesOf(message.messageId)).toEqual(['processed']);
    expect(await available()).toBe(99);
  });

  it('replaces a worker whose fetch loop wedged, so the deliveries waiting for it are taken', async () => {
    const errors: unknown[] = [];
    const consumer = start({ onError: (error) => errors.push(error) });
    await consumer.worker.waitUntilReady();
    // Wedged as a BullMQ worker is when its blocking connection never comes back (liveness.ts):
    // every wait for a job and every fetch hangs, and nothing says so.
    const wedged = consumer.worker;
    const backend = wedged.getBackend() as unknown as Record<'waitForJob' | 'moveToActive', () => Promise<never>>;
    backend.waitForJob = () => new Promise<never>(() => {});
    backend.moveToActive = () => new Promise<never>(() => {});
    const message = orderPlacedMessage();
    await publisher.publish([message]);
    expect(
      await waitFor(() => outcomesOf(message.messageId).length > 0 && outcomesOf(message.messageId), {
        timeoutMs: 30_000,
        what: 'the delivery taken by a new worker',
      }),
    ).toEqual(['processed']);
    expect(consumer.worker).not.toBe(wedged);
    expect(errors).toContainEqual(
      expect.objectContaining({ message: expect.stringMatching(/its worker was replaced$/) }),
    );
  }, 40_000);

  it('subscribes and takes deliveries once Redis is back, when it started with its link dead', async () => {
    const link = await startNetworkPath({ host: '127.0.0.1', port: Number(new URL(redisUrl).port || 6379) });
    try {
      link.blackhole();
      const errors: unknown[] = [];
      start({ redisUrl: `redis://127.0.0.1:${link.port}`, onError: (error) => errors.push(error) });
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      link.restore();
      const message = orderPlacedMessage();
      await publisher.publish([message]);
      // Its first try to subscribe timed out behind the dead link, a later one subscribed; its
      // worker's connection stayed dead too, and the liveness watch replaced it (two looks, 5 s apart).
      const taken = () => outcomesOf(message.messageId).length > 0 && outcomesOf(message.messageId);
      expect(await waitFor(taken, { timeoutMs: 40_000, what: 'the delivery taken' })).toEqual(['processed']);
      expect(errors).toContainEqual(expect.objectContaining({ message: expect.stringMatching(/not ready within/) }));
    } finally {
      await Promise.all(running.splice(0).map((consumer) => consumer.close(1000)));
      await link.close();
    }
  }, 60_000);

  it('completes a stale delivery after committing its record', async () => {
    start({ handler: async () => ({ outcome: 'stale', reason: 'order already cancelled' }) });
    const message = orderPlacedMessage();
    await publisher.publish([message]);
    expect(await waitForOutcomes(message.messageId, 1)).toEqual(['stale']);
    expect(await db.prisma.processedMessage.count()).toBe(1);
  });
});

describe('group commit', () => {
  /** One delivery that holds its transaction, then `count` more that arrive meanwhile and commit as one batch. */
  async function publishBatch<const T extends Envelope<'orders.order-placed.v1'>[]>(...batch: T): Promise<T> {
    const holding = orderPlacedMessage({}, HOLDING_SKU);
    await publisher.publish([holding]);
    await waitFor(async () => (await queue.getJobState(holding.messageId)) === 'active', {
      what: 'the holding delivery',
    });
    await publisher.publish(batch);
    return batch;
  }
  const messages = (count: number) => Array.from({ length: count }, () => orderPlacedMessage());
  /** The database client of one instance, counting its transactions. */
  function counted() {
    const client = db.connect();
    const count = { transactions: 0 };
    const $transaction = client.$transaction.bind(client) as typeof client.$transaction;
    return {
      count,
      client: Object.assign(client, {
        $transaction: ((...args: Parameters<typeof $transaction>) => {
          count.transactions++;
          return $transaction(...args);
        }) as typeof $transaction,
      }),
    };
  }

  it('commits concurrent deliveries together and settles each after the shared commit', async () => {
    const { client, count } = counted();
    start({ inbox: createInbox({ db: client }) });
    const batch = await publishBatch(...messages(5));
    for (const message of batch) expect(await waitForOutcomes(message.messageId, 1)).toEqual(['processed']);
    expect(count.transactions).toBe(2); // the holding delivery's, then one for the five
    expect(await available()).toBe(95);
  });

  it('dead-letters only the poison message of a batch; the others are processed', async () => {
    const { client, count } = counted();
    start({
      inbox: createInbox({ db: client }),
      handler: async (message, tx) =>
        message.body.lines[0]!.sku === 'poison'
          ? permanentFailure('poison', 'this message can never be applied')
          : reserveOneUnit(CONSUMER)(message, tx),
    });
    const [first, poison, last] = await publishBatch(
      orderPlacedMessage(),
      orderPlacedMessage({}, 'poison'),
      orderPlacedMessage(),
    );
    expect(await waitForOutcomes(poison.messageId, 1)).toEqual(['permanent_failure']);
    for (const message of [first, last]) expect(await waitForOutcomes(message.messageId, 1)).toEqual(['processed']);
    expect(reports.find((r) => r.messageId === poison.messageId)!.deadLettered).toBe(true);
    expect(await db.prisma.deadLetter.count()).toBe(1);
    expect(await available()).toBe(98);
    // The holding delivery's; the batch's, rolled back by the poison; then one per message.
    expect(count.transactions).toBe(1 + 1 + 3);
  });

  it('redelivers every message of a batch after a SIGKILL between its commit and settlement: each is then a duplicate', async () => {
    const child = await startCrashingConsumer();
    const batch = await publishBatch(...messages(5));

    expect(await exited(child)).toBe('SIGKILL');
    // The batch committed before the crash: five effects and five records, none settled.
    expect(await available()).toBe(95);
    for (const message of batch) expect(await queue.getJobState(message.messageId)).toBe('active');

    start(); // another instance takes the deliveries over once the dead one's locks expire
    for (const message of batch) expect(await waitForOutcomes(message.messageId, 1)).toEqual(['duplicate']);
    expect(await available()).toBe(95);
  });

  it('gives one business change per message when two instances batch copies of the same messages', async () => {
    const slowReserve = async (message: Envelope<'orders.order-placed.v1'>, tx: Tx) => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      return reserveOneUnit(CONSUMER)(message, tx);
    };
    for (const client of [db.connect(), db.connect()])
      start({ inbox: createInbox({ db: client }), handler: slowReserve });
    const twice = createPublisher({ catalogue: shop, prefix, faults: createFaults(parseFaultRules('publish-twice')) });
    try {
      const copied = messages(12);
      await twice.publish(copied);
      for (const message of copied) {
        expect((await waitForOutcomes(message.messageId, 2)).sort()).toEqual(['duplicate', 'processed']);
      }
      expect(await available()).toBe(88);
      expect(await db.prisma.processedMessage.count()).toBe(12);
    } finally {
      await twice.close();
    }
  });
});

describe('the delivery journal', () => {
  it('records every settled delivery, the suppressed duplicate included, after the broker settled it', async () => {
    const redis = new Redis(redisUrl);
    const journal = createDeliveryJournal({ redis, prefix, service: 'inventory', flushIntervalMs: 10 });
    const settledStates: string[] = [];
    start({
      onRecorded: (report) => {
        journal.record(deliveryEntry(report, 'test/1'));
        void queue.getJobState(report.messageId).then((state) => settledStates.push(state));
      },
    });
    try {
      const message = orderPlacedMessage();
      await publisher.publish([message]);
      await waitForOutcomes(message.messageId, 1);
      await publisher.publish([message]);
      await waitForOutcomes(message.messageId, 2);
      const entries = await waitFor(async () => {
        await journal.flush();
        const found = (await readJournal(redis, prefix, ['inventory'])).entries.filter(
          (entry) => entry.kind === 'delivery' && entry.messageId === message.messageId,
        );
        return found.length === 2 && found;
      });
      expect(entries).toEqual([
        expect.objectContaining({ outcome: 'processed', correlationId: message.correlationId, consumer: CONSUMER }),
        expect.objectContaining({ outcome: 'duplicate', correlationId: message.correlationId, attempt: 1 }),
      ]);
      // onRecorded ran once the job had left the active state (completed, and removed at once here).
      expect(settledStates).not.toContain('active');
    } finally {
      await journal.close();
      redis.disconnect();
    }
  });

  it('never holds a delivery up when Redis cannot take the journal', async () => {
    const broken = new Redis('redis://127.0.0.1:1', {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
    });
    broken.on('error', () => {});
    const journal = createDeliveryJournal({ redis: broken, prefix, service: 'inventory', flushIntervalMs: 5 });
    start({ onRecorded: (report) => journal.record(deliveryEntry(report, 'test/1')) });
    const message = orderPlacedMessage();
    await publisher.publish([message]);
    expect(await waitForOutcomes(message.messageId, 1)).toEqual(['processed']);
    await journal.close(); // resolves: the entry is dropped, not retried forever
    broken.disconnect();
  });
});

describe('replaying dead letters', () => {
  const record = (inbox: ReturnType<typeof createInbox>, messageId: string) =>
    inbox.deadLetters.record({
      consumer: CONSUMER,
      messageId,
      payload: { id: messageId },
      code: 'x',
      reason: 'x',
      attempts: 1,
    });

  it('replays the message ids asked for wherever they are, not only among the first page', async () => {
    const inbox = createInbox({ db: db.prisma });
    const ids = Array.from({ length: 120 }, (_, i) => `replay-page-${String(i).padStart(3, '0')}`);
    for (const id of ids) await record(inbox, id);
    const replayed = await replayDeadLetters(inbox.deadLetters, publisher, { messageIds: [ids[110]!] });
    expect(replayed.map((d) => d.messageId)).toEqual([ids[110]]);
    expect(await queue.getJob(ids[110]!)).toBeDefined();
  });

  it('refuses dead letters older than the replay window unless forced with a reason', async () => {
    let now = new Date();
    const inbox = createInbox({ db: db.prisma, now: () => now });
    await record(inbox, 'replay-old-1');
    now = new Date(now.getTime() + 8 * 24 * 3_600_000); // eight days later; the window is seven
    const window = { replayWindowMs: 7 * 24 * 3_600_000, now: () => now };
    const filter = { messageIds: ['replay-old-1'] };
    await expect(replayDeadLetters(inbox.deadLetters, publisher, filter, window)).rejects.toBeInstanceOf(
      ReplayWindowError,
    );
    expect(await inbox.deadLetters.list(filter)).toHaveLength(1); // nothing replayed
    const forced = await replayDeadLetters(inbox.deadLetters, publisher, filter, {
      ...window,
      force: { reason: 'the record is known to be kept: retention is 30 days here' },
    });
    expect(forced.map((d) => d.messageId)).toEqual(['replay-old-1']);
  });
});
