import { newMessageId } from '@idem/contracts';
import { createTestDatabase, orderPlacedMessage, type TestDatabase } from '@idem/testkit';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createInbox } from './inbox.js';
import { processed } from './outcomes.js';
import { addPartitions } from './partitions.js';
import { createInboxRetention } from './retention.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const horizon = { brokerRetentionMs: DAY, maxRetrySpanMs: HOUR, replayWindowMs: 6 * DAY };
const retentionMs = 8 * DAY;
const consumer = 'inventory.order-placed.v1';
/** Midnight, UTC: the spans below are days. */
const d0 = Date.parse('2026-12-01T00:00:00Z');
const at = (ms: number) => new Date(ms);

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('partitions');
});
afterAll(() => db.drop());
beforeEach(async () => {
  await db.prisma.$executeRaw`TRUNCATE processed_messages`;
  for (const { name } of await partitions()) await db.prisma.$executeRawUnsafe(`DROP TABLE "${name}"`);
});

async function partitions() {
  return db.prisma.$queryRaw<{ name: string }[]>`
    SELECT c.relname::text AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = 'processed_messages'::regclass AND c.relname <> 'processed_messages_default'
     ORDER BY 1`;
}

/** Where each record of `consumer` is kept: its message id → the partition. */
async function placement() {
  const rows = await db.prisma.$queryRaw<{ id: string; partition: string }[]>`
    SELECT message_id::text AS id, tableoid::regclass::text AS partition FROM processed_messages`;
  return Object.fromEntries(rows.map((row) => [row.id, row.partition]));
}

/** A message made at `made`, as `enqueue` makes one then (its id a UUID v7 of that time). */
const madeAt = (made: number) => orderPlacedMessage({ messageId: newMessageId(at(made)) });

describe('processed_messages in partitions of message time', () => {
  it("runs its owner's functions with a search_path that ends with pg_temp, as SECURITY DEFINER functions must", async () => {
    const settings = await db.prisma.$queryRaw<{ name: string; config: string[] }[]>`
      SELECT proname::text AS name, proconfig AS config FROM pg_proc
       WHERE proname IN ('idem_inbox_add_partition', 'idem_inbox_drop_partitions') ORDER BY 1`;
    expect(settings.map(({ name, config }) => [name, config.find((c) => c.startsWith('search_path='))])).toEqual([
      ['idem_inbox_add_partition', 'search_path=public, pg_temp'],
      ['idem_inbox_drop_partitions', 'search_path=public, pg_temp'],
    ]);
  });

  it('makes the partitions of the coming spans, never the current one, and keeps a message in the partition of its time', async () => {
    expect(await addPartitions(db.prisma, at(d0 + 5 * HOUR), DAY)).toEqual({
      '2026-12-02T00:00:00.000Z': 'added',
      '2026-12-03T00:00:00.000Z': 'added',
    });
    expect(await addPartitions(db.prisma, at(d0 + 6 * HOUR), DAY)).toEqual({
      '2026-12-02T00:00:00.000Z': 'exists',
      '2026-12-03T00:00:00.000Z': 'exists',
    });
    expect((await partitions()).map((p) => p.name)).toEqual([
      'processed_messages_p202612020000',
      'processed_messages_p202612030000',
    ]);
    const inbox = createInbox({ db: db.prisma });
    const [today, tomorrow, lastMs, v4] = [
      madeAt(d0 + HOUR),
      madeAt(d0 + DAY),
      madeAt(d0 + 2 * DAY - 1),
      orderPlacedMessage({ messageId: crypto.randomUUID() }),
    ];
    for (const message of [today, tomorrow, lastMs, v4]) await inbox.consume(consumer, message, async () => processed);
    expect(await placement()).toEqual({
      [today.messageId]: 'processed_messages_default',
      [tomorrow.messageId]: 'processed_messages_p202612020000',
      [lastMs.messageId]: 'processed_messages_p202612020000',
      [v4.messageId]: 'processed_messages_default',
    });
  });

  it('catches a copy across a partition boundary, and a copy racing the first delivery in a partition', async () => {
    await addPartitions(db.prisma, at(d0), DAY);
    const message = madeAt(d0 + DAY + 23 * HOUR);
    // Processed at the end of the span its id is in, its copy arrives in the next day's.
    const first = createInbox({ db: db.prisma, now: () => at(d0 + 2 * DAY - 1) });
    const later = createInbox({ db: db.prisma, now: () => at(d0 + 2 * DAY + HOUR) });
    expect(await first.consume(consumer, message, async () => processed)).toEqual({ outcome: 'processed' });
    expect(await later.consume(consumer, message, async () => processed)).toEqual({ outcome: 'duplicate' });
    // Two deliveries at once: both pass the duplicate read, the partition's primary key decides.
    const racing = madeAt(d0 + DAY + HOUR);
    let handled = 0;
    const handler = async () => {
      handled++;
      await new Promise((resolve) => setTimeout(resolve, 100));
      return processed;
    };
    const outcomes = await Promise.all([
      first.consume(consumer, racing, handler),
      later.consume(consumer, racing, handler),
    ]);
    expect(outcomes.map((o) => o.outcome).sort()).toEqual(['duplicate', 'processed']);
    expect(handled).toBe(1);
    // The same id with another body: a conflicting duplicate, named by the partition's key.
    const conflicting = { ...racing, body: { ...racing.body, currency: 'USD' } } as typeof racing;
    expect(await later.consume(consumer, conflicting, async () => processed)).toMatchObject({
      outcome: 'conflicting_duplicate',
    });
    expect(Object.values(await placement())).toEqual([
      'processed_messages_p202612020000',
      'processed_messages_p202612020000',
    ]);
  });

  it('drops a partition whole once every record in it is past the retention, and not one record sooner', async () => {
    await addPartitions(db.prisma, at(d0), DAY); // the partitions of 2 and 3 December
    const inbox = (now: number) => createInbox({ db: db.prisma, now: () => at(now) });
    const old = [madeAt(d0 + DAY + HOUR), madeAt(d0 + DAY + 2 * HOUR)];
    for (const message of old) await inbox(d0 + DAY + 3 * HOUR).consume(consumer, message, async () => processed);
    // A message of 2 December delivered first on 6 December: its record is young there.
    const late = madeAt(d0 + DAY + 4 * HOUR);
    await inbox(d0 + 5 * DAY).consume(consumer, late, async () => processed);
    const retention = (now: number) =>
      createInboxRetention({ db: db.prisma, retentionMs, horizon, now: () => at(now) });

    // 11 December: the records of 2 December are past the retention, the late one is not.
    const first = await retention(d0 + 10 * DAY).purge();
    expect(first.dropped).toEqual([]);
    expect(first.deleted).toBe(0);
    expect(Object.keys(await placement())).toHaveLength(3);
    // A copy of an old message there is still a duplicate: its partition is still there.
    expect(await inbox(d0 + 10 * DAY).consume(consumer, old[0]!, async () => processed)).toEqual({
      outcome: 'duplicate',
    });

    // 14 December: the late record is past it too, and the partition goes whole; so does the
    // empty one of 3 December. The partitions of the days after each purge's were made ahead.
    const second = await retention(d0 + 13 * DAY + 1).purge();
    expect(second.dropped).toEqual([
      { partition: 'processed_messages_p202612020000', records: 3 },
      { partition: 'processed_messages_p202612030000', records: 0 },
    ]);
    expect(await placement()).toEqual({});
    expect((await partitions()).map((p) => p.name)).toEqual([
      'processed_messages_p202612120000',
      'processed_messages_p202612130000',
      'processed_messages_p202612150000',
      'processed_messages_p202612160000',
    ]);
  });

  it('leaves a span in the DEFAULT partition when a record of it is there already, and still catches its copies', async () => {
    const early = madeAt(d0 + DAY + HOUR); // a clock ahead, or a partition made too late
    const inbox = createInbox({ db: db.prisma, now: () => at(d0) });
    await inbox.consume(consumer, early, async () => processed);
    expect(await addPartitions(db.prisma, at(d0), DAY)).toEqual({
      '2026-12-02T00:00:00.000Z': 'overlaps',
      '2026-12-03T00:00:00.000Z': 'added',
    });
    expect(await inbox.consume(consumer, early, async () => processed)).toEqual({ outcome: 'duplicate' });
    expect(await placement()).toEqual({ [early.messageId]: 'processed_messages_default' });
  });

  it('does not wait on a busy table: a drop that cannot lock it within lock_timeout is tried at the next purge', async () => {
    await addPartitions(db.prisma, at(d0), DAY);
    const retention = createInboxRetention({ db: db.prisma, retentionMs, horizon, now: () => at(d0 + 20 * DAY) });
    const busy = db.connect();
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const transaction = busy.$transaction(
      async (tx) => {
        await tx.$executeRaw`INSERT INTO processed_messages VALUES (${consumer}, ${newMessageId(at(d0))}::uuid, ${'0'.repeat(64)}, ${at(d0)})`;
        await held;
      },
      { timeout: 30_000 },
    );
    try {
      await new Promise((resolve) => setTimeout(resolve, 200)); // the insert is in
      const busy = await retention.purge();
      expect(busy.dropped).toEqual([]);
      expect(Object.values(busy.added)).toEqual(['busy', 'busy']); // the DEFAULT partition could not be checked
    } finally {
      release();
      await transaction;
    }
    const free = await retention.purge();
    expect(Object.values(free.added)).toEqual(['added', 'added']);
    expect(free.dropped.map((d) => d.partition)).toEqual([
      'processed_messages_p202612020000',
      'processed_messages_p202612030000',
    ]);
  });
});
