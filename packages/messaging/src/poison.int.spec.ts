/**
 * Fuzzing a real queue with poison: a few hundred malformed jobs of many kinds — not an
 * envelope at all, wrong types, unknown contracts, NUL characters and lone UTF-16 surrogates in
 * any field or key, oversized strings, and messages valid for the contract whose data
 * PostgreSQL cannot store. Bad input loses nothing: each is stored once as a dead letter with a
 * bounded reason and its payload recoverable, counted once, never recorded as processed, and
 * the worker keeps serving.
 */
import type { Envelope } from '@idem/shop';
import { createInbox, processed, type MessageHandler } from '@idem/inbox';
import {
  createTestDatabase,
  deleteQueues,
  orderPlacedMessage,
  redisUrl,
  uniqueName,
  waitFor,
  type TestDatabase,
} from '@idem/testkit';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Tx } from '../test/fixtures.js';
import { startConsumer, type Consumer, type DeliveryReport } from './consumer.js';
import {
  DeadLetterWriteError,
  replayDeadLetters,
  ReplayTruncatedError,
  defaultDeliveryPolicy,
  UnservedSubscriptionError,
} from '@idem/transport';
import { createPublisher } from './publisher.js';
import { jobOptions } from './delivery-policy.js';
import { shop } from '@idem/shop';

const CONSUMER = 'inventory.order-placed.v1';
const SKU = 'sku-ok';

/** Takes one unit of the ordered SKU: the message's own text reaches PostgreSQL, as in a real handler. */
const takeTheOrderedUnit: MessageHandler<Tx, Envelope<'orders.order-placed.v1'>> = async (message, tx) => {
  const { lines, paymentMethod } = message.body;
  await tx.$executeRaw`
    UPDATE stock_items SET available = available - 1 WHERE sku = ${lines[0]!.sku} AND ${paymentMethod}::text <> ''`;
  return processed;
};
const prefix = uniqueName('idem_test_poison');
let db: TestDatabase;
let queue: Queue;
let consumer: Consumer;
const reports: DeliveryReport[] = [];

beforeAll(async () => {
  db = await createTestDatabase('poison');
  await db.prisma.stockItem.create({ data: { sku: SKU, available: 1000 } });
  queue = new Queue(CONSUMER, { connection: new Redis(redisUrl, { maxRetriesPerRequest: null }), prefix });
  consumer = startConsumer({
    catalogue: shop,
    consumer: CONSUMER,
    inbox: createInbox({ db: db.prisma }),
    handler: takeTheOrderedUnit,
    prefix,
    concurrency: 8,
    onDelivery: (report) => reports.push(report),
  });
});
afterAll(async () => {
  await consumer.close(1000);
  await queue.close();
  await deleteQueues(prefix);
  await db.drop();
});

/** A small deterministic generator, so a failing case can be found again. */
function random(seed: number) {
  return () => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
    return seed / 2 ** 31;
  };
}

const BAD_TEXT = ['\u0000', 'a\u0000b', '\ud800', 'x\udc00y', '\udbff\u0000', `${'z'.repeat(20_000)}\u0000`];

/** Puts `bad` somewhere in a copy of `value`: in a string field, or as a key. */
function poisonSomewhere(value: unknown, bad: string, next: () => number): unknown {
  if (Array.isArray(value)) return value.map((item, i) => (i === 0 ? poisonSomewhere(item, bad, next) : item));
  if (value && typeof value === 'object') {
    const entries = Object.entries(value);
    const pick = Math.floor(next() * (entries.length + 1));
    if (pick === entries.length) return { ...value, [`key${bad}`]: 'value' };
    return Object.fromEntries(
      entries.map(([key, item], i) => [key, i === pick ? poisonSomewhere(item, bad, next) : item]),
    );
  }
  return typeof value === 'string' ? `${value.slice(0, 4)}${bad}${value.slice(4)}` : bad;
}

function poisonJobs(count: number): { id: string; data: unknown }[] {
  const next = random(20261130);
  const kinds: ((i: number) => unknown)[] = [
    () => null,
    (i) => i,
    () => 'just a string \u0000',
    () => [1, '\ud800', { '\u0000': true }],
    () => ({ hello: 'world' }),
    () => ({ ...orderPlacedMessage({}, SKU), type: 'orders.order-placed.v9' }),
    () => ({ ...orderPlacedMessage(), type: 'nobody.knows-this.v1' }),
    () => ({ ...orderPlacedMessage(), aggregateVersion: 'three' }),
    () => {
      const message = orderPlacedMessage();
      return { ...message, body: { ...message.body, lines: [] } };
    },
    () => ({ ...orderPlacedMessage(), messageId: `not-a-uuid-${'\u0000'}` }),
    () => ({ ...orderPlacedMessage(), producer: 'p'.repeat(100_000) }),
    () => ({ ...orderPlacedMessage(), padding: 'x'.repeat(300_000) }), // over the size accepted: not even parsed
    // Lookalikes of the in-band wrappers an earlier version stored: kept and given back as they came.
    () => ({ $idem_json_text: '[1,2,3]' }),
    () => ({ $idem_json_text: 'not json at all' }),
    () => ({ $idem_json_text: 'a\u0000b' }),
    () => ({ $idem_truncated_json_text: 'x', bytes: 1, sha256: '0'.repeat(64) }),
    () => ({ b: 1, a: [{ z: '\ud800', y: 2 }], $idem_json_text: '{}' }), // key order kept too
    () => poisonSomewhere(orderPlacedMessage({}, SKU), BAD_TEXT[Math.floor(next() * BAD_TEXT.length)]!, next),
    // Valid for the contract; the business change fails in PostgreSQL (a NUL in the payment method).
    () => {
      const message = orderPlacedMessage({}, SKU);
      return { ...message, body: { ...message.body, paymentMethod: 'pm_card\u0000visa' } };
    },
  ];
  return Array.from({ length: count }, (_, i) => ({ id: `poison-${i}`, data: kinds[i % kinds.length]!(i) }));
}

describe('poison messages on a real queue', () => {
  it('ends every one once — a dead letter stored once and counted once, or processed once — and keeps serving', async () => {
    const jobs = poisonJobs(260);
    for (const job of jobs) {
      await queue.add('poison', job.data, { ...jobOptions(defaultDeliveryPolicy, job.id), attempts: 3 });
    }
    // A report names the job by its message id when the envelope parsed, by the job id otherwise.
    const idsOf = (job: { id: string; data: unknown }) => [
      job.id,
      (job.data as { messageId?: unknown } | null)?.messageId,
    ];
    const ended = () =>
      new Set(reports.filter((r) => r.deadLettered || r.outcome.outcome === 'processed').map((r) => r.messageId));
    await waitFor(() => jobs.every((job) => idsOf(job).some((id) => ended().has(id as string))), {
      timeoutMs: 60_000,
      what: `all ${jobs.length} jobs to end`,
    });

    const deadLettered = reports.filter((r) => r.deadLettered);
    const processedOnes = reports.filter((r) => r.outcome.outcome === 'processed');
    // Each job ends exactly once; nothing ends both ways; a dead letter is counted once, when stored.
    expect(deadLettered.length + processedOnes.length).toBe(jobs.length);
    expect(new Set([...deadLettered, ...processedOnes].map((r) => r.messageId)).size).toBe(jobs.length);
    expect(await db.prisma.deadLetter.count()).toBe(deadLettered.length);
    expect(deadLettered.length).toBeGreaterThan(jobs.length / 2);
    const rows = await db.prisma.deadLetter.findMany({ select: { reason: true, code: true } });
    expect(rows.every((row) => row.reason.length > 0 && row.reason.length <= 500)).toBe(true);
    // Data PostgreSQL refuses (SQLSTATE class 22) is a permanent failure, not retried for minutes.
    expect(rows.map((row) => row.code)).toContain('invalid_data');
    expect(deadLettered.filter((r) => r.outcome.outcome === 'transient_failure')).toEqual([]);
    // Only what the contract accepted and PostgreSQL could store was processed: one unit each.
    expect(await db.prisma.processedMessage.count()).toBe(processedOnes.length);
    const { available } = await db.prisma.stockItem.findUniqueOrThrow({ where: { sku: SKU } });
    expect(1000 - available).toBe(processedOnes.length);

    // What was delivered comes back byte for byte — NUL characters, lone surrogates, key order and
    // lookalikes of old wrappers included — from a payload read and through a replay.
    const deadLetters = createInbox({ db: db.prisma }).deadLetters;
    const listed = await deadLetters.list({ limit: 1000 });
    const deadLetterOf = (job: { id: string; data: unknown }) => listed.find((d) => idsOf(job).includes(d.messageId));
    const kept = jobs.filter((job) => deadLetterOf(job) && !deadLetterOf(job)!.truncated);
    expect(kept.filter((job) => /\\u0000|\\ud[89a-f]/i.test(JSON.stringify(job.data))).length).toBeGreaterThan(20);
    expect(kept.filter((job) => /\$idem_/.test(JSON.stringify(job.data))).length).toBeGreaterThanOrEqual(5);
    for (const job of kept) expect(JSON.stringify(deadLetterOf(job)!.payload)).toBe(JSON.stringify(job.data));

    // A payload over the size accepted is kept bounded, and said to be: its start, its size.
    const huge = jobs.find((job) => JSON.stringify(job.data).length > 256 * 1024)!;
    expect(deadLetterOf(huge)).toMatchObject({ truncated: true, payloadBytes: JSON.stringify(huge.data).length });
    expect(JSON.stringify(huge.data).startsWith(deadLetterOf(huge)!.payload as string)).toBe(true);
    expect(rows.map((row) => row.code)).toContain('payload_too_large');

    // A replay refuses the truncated one (it is not the message that was delivered) unless
    // forced, and sends every other exactly as it came.
    const replayPrefix = uniqueName('idem_test_poison_replay');
    const publisher = createPublisher({ catalogue: shop, redisUrl, prefix: replayPrefix });
    const replayQueue = new Queue(CONSUMER, {
      connection: new Redis(redisUrl, { maxRetriesPerRequest: null }),
      prefix: replayPrefix,
    });
    try {
      await expect(replayDeadLetters(deadLetters, publisher, { limit: 1000 })).rejects.toBeInstanceOf(
        ReplayTruncatedError,
      );
      const ids = kept.map((job) => deadLetterOf(job)!.messageId);
      expect((await replayDeadLetters(deadLetters, publisher, { messageIds: ids, limit: 1000 })).length).toBe(
        ids.length,
      );
      for (const job of kept) {
        const replayed = await replayQueue.getJob(deadLetterOf(job)!.messageId);
        expect(JSON.stringify(replayed!.data)).toBe(JSON.stringify(job.data));
      }
    } finally {
      await publisher.close();
      await replayQueue.close();
      await deleteQueues(replayPrefix);
    }

    // The worker is alive: a valid message afterwards is processed.
    const valid = orderPlacedMessage({}, SKU);
    await queue.add(valid.type, valid, jobOptions(defaultDeliveryPolicy, valid.messageId));
    await waitFor(() => reports.some((r) => r.messageId === valid.messageId && r.outcome.outcome === 'processed'));
  }, 120_000);
});

describe('a dead letter that cannot be stored', () => {
  it('is neither counted nor logged as one: the error is its own, and the job stays failed in BullMQ', async () => {
    const unstorable = await createTestDatabase('poison_unstored');
    const unstorablePrefix = uniqueName('idem_test_unstored');
    await unstorable.prisma.$executeRaw`ALTER TABLE dead_letters RENAME TO dead_letters_gone`; // the write fails
    const errors: unknown[] = [];
    const seen: DeliveryReport[] = [];
    const failing = startConsumer({
      catalogue: shop,
      consumer: CONSUMER,
      inbox: createInbox({ db: unstorable.prisma }),
      handler: takeTheOrderedUnit,
      prefix: unstorablePrefix,
      onDelivery: (report) => seen.push(report),
      // Its subscription is unserved (nothing published under this prefix yet): said, and not this test's.
      onError: (error) => void (error instanceof UnservedSubscriptionError || errors.push(error)),
    });
    const jobs = new Queue(CONSUMER, {
      connection: new Redis(redisUrl, { maxRetriesPerRequest: null }),
      prefix: unstorablePrefix,
    });
    try {
      await jobs.add('poison', { not: 'an envelope' }, { jobId: 'unstored-1', attempts: 2 });
      await waitFor(async () => (await jobs.getJobState('unstored-1')) === 'failed', { what: 'the job to fail' });
      expect(seen.map((r) => [r.outcome.outcome, r.deadLettered])).toEqual([
        ['permanent_failure', false],
        ['permanent_failure', false],
      ]);
      expect(errors).toEqual([expect.any(DeadLetterWriteError), expect.any(DeadLetterWriteError)]);
      expect(errors[0]).toMatchObject({ consumer: CONSUMER, messageId: 'unstored-1' });
    } finally {
      await failing.close(1000);
      await jobs.close();
      await deleteQueues(unstorablePrefix);
      await unstorable.drop();
    }
  });
});

describe('the ids a dead letter is kept under', () => {
  it("is the envelope's message id, the job's id beside it (a republished copy's job has its own)", async () => {
    const message = orderPlacedMessage({}, SKU);
    const refused = { ...message, body: { ...message.body, lines: [] } }; // the contract refuses it
    const jobId = `${message.messageId}-again`;
    await queue.add('republished', refused, { ...jobOptions(defaultDeliveryPolicy, jobId), attempts: 1 });
    await queue.add('malformed', { not: 'an envelope' }, { jobId: 'malformed-ids-1', attempts: 1 });
    const deadLetters = createInbox({ db: db.prisma }).deadLetters;
    const ids = [message.messageId, 'malformed-ids-1'];
    await waitFor(async () => (await deadLetters.list({ messageIds: ids })).length === 2, { what: 'two dead letters' });
    const kept = await deadLetters.list({ messageIds: ids, payloads: false });
    expect(kept.map(({ messageId, brokerId }) => ({ messageId, brokerId }))).toEqual(
      expect.arrayContaining([
        { messageId: message.messageId, brokerId: jobId },
        // Too malformed to carry a message id: kept under its job's.
        { messageId: 'malformed-ids-1', brokerId: 'malformed-ids-1' },
      ]),
    );
  });
});
