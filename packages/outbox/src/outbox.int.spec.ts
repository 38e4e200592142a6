import { randomUUID } from 'node:crypto';
import type { AnyEnvelope } from '@idem/contracts';
import type { EventDraft } from '@idem/shop';
import { fromNodePostgres } from '@idem/database';
import { createTestDatabase, waitFor, type TestDatabase } from '@idem/testkit';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { enqueue } from './enqueue.js';
import { listParked, outboxBacklog, purgePublished, retryParked } from './maintenance.js';
import { createPooledRelay, createRelay, RELAY_POOL_NAME } from './relay.js';
import { shop } from '@idem/shop';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase('outbox');
});
afterAll(() => db.drop());
beforeEach(async () => {
  await db.prisma.$executeRaw`TRUNCATE outbox_messages`;
});

function cancelled(): EventDraft<'orders.order-cancelled.v1'> {
  const orderId = randomUUID();
  return {
    type: 'orders.order-cancelled.v1',
    body: { orderId, reason: 'customer asked' },
    aggregateId: orderId,
    aggregateVersion: 2,
    correlationId: randomUUID(),
    causationId: null,
  };
}

describe('enqueue', () => {
  it('writes the event only if the caller’s transaction commits', async () => {
    await expect(
      db.prisma.$transaction(async (tx) => {
        await enqueue(tx, shop, cancelled(), new Date());
        throw new Error('business change failed');
      }),
    ).rejects.toThrow('business change failed');
    expect(await db.prisma.outboxMessage.count()).toBe(0);

    const envelope = await db.prisma.$transaction((tx) => enqueue(tx, shop, cancelled(), new Date()));
    const row = await db.prisma.outboxMessage.findUniqueOrThrow({ where: { messageId: envelope.messageId } });
    expect(row.envelope).toEqual(envelope);
    expect(envelope).toMatchObject({ producer: 'orders', type: 'orders.order-cancelled.v1' });
  });
});

describe('relay', () => {
  it('on a pool of its own, holds only its own connections while the broker hangs: the service keeps its pool', async () => {
    await db.prisma.$transaction(async (tx) => {
      for (let i = 0; i < 12; i++) await enqueue(tx, shop, cancelled(), new Date());
    });
    let release!: () => void;
    const broker = new Promise<void>((resolve) => (release = resolve));
    const relay = createPooledRelay({
      databaseUrl: db.url,
      batchSize: 3,
      concurrency: 2,
      publishTimeoutMs: 60_000,
      publish: () => broker, // a broker that does not answer
    });
    // The service's own pool: one connection, which a relay on it would have taken.
    const service = fromNodePostgres(new pg.Pool({ connectionString: db.url, max: 1 }));
    const relayConnections = async () =>
      (
        await db.prisma.$queryRaw<{ n: number }[]>`
          SELECT count(*)::int AS n FROM pg_stat_activity
           WHERE datname = current_database() AND application_name = ${RELAY_POOL_NAME}`
      )[0]!.n;
    relay.start();
    try {
      // Both loops hold a batch (a full batch wakes the second) and wait for the broker.
      await waitFor(async () => (await relayConnections()) === 2, {
        what: "two batches in flight on the relay's pool",
      });
      const answer = await service.$transaction(async (tx) => tx.$queryRaw<{ one: number }[]>`SELECT 1 AS one`, {
        maxWait: 1_000,
      });
      expect(answer).toEqual([{ one: 1 }]);
      expect(await relayConnections()).toBe(2); // never more than its concurrency
    } finally {
      release();
      await relay.stop();
      await service.pool.end();
    }
    // Stopping closed its pool (a backend leaves pg_stat_activity a moment after its client).
    await waitFor(async () => (await relayConnections()) === 0, { what: "the relay's pool closed" });
    // The two batches held while the broker hung were published once it answered.
    expect(await db.prisma.outboxMessage.count({ where: { publishedAt: { not: null } } })).toBeGreaterThanOrEqual(6);
  });

  it('publishes pending rows with their original message ids, then marks them published', async () => {
    const written = await db.prisma.$transaction(async (tx) => [
      await enqueue(tx, shop, cancelled(), new Date()),
      await enqueue(tx, shop, cancelled(), new Date()),
    ]);
    const published: AnyEnvelope[] = [];
    const relay = createRelay({ db: db.prisma, publish: async (batch) => void published.push(...batch) });

    expect(await relay.publishBatch()).toEqual({ published: 2 });
    expect(published.map((e) => e.messageId)).toEqual(written.map((e) => e.messageId));
    expect(await db.prisma.outboxMessage.count({ where: { publishedAt: null } })).toBe(0);
    expect(await relay.publishBatch()).toEqual({ published: 0 });
  });

  it('works the same on a plain node-postgres pool: written only on commit, published once, backlog read', async () => {
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    const pgDb = fromNodePostgres(pool);
    try {
      await expect(
        pgDb.$transaction(async (tx) => {
          await enqueue(tx, shop, cancelled(), new Date());
          throw new Error('the business change failed');
        }),
      ).rejects.toThrow('the business change failed');
      const written = await pgDb.$transaction(async (tx) => [
        await enqueue(tx, shop, cancelled(), new Date()),
        await enqueue(tx, shop, cancelled(), new Date()),
      ]);
      expect(await outboxBacklog(pgDb)).toMatchObject({ pending: 2, parked: 0 });
      const published: AnyEnvelope[] = [];
      const relay = createRelay({ db: pgDb, publish: async (batch) => void published.push(...batch) });
      expect(await relay.publishBatch()).toEqual({ published: 2 });
      expect(published.map((e) => e.messageId)).toEqual(written.map((e) => e.messageId));
      expect(await relay.publishBatch()).toEqual({ published: 0 });
      expect(await outboxBacklog(pgDb)).toMatchObject({ pending: 0, parked: 0 });
    } finally {
      await pool.end();
    }
  });

  it('keeps attempts and the last error while the broker is down, backs off, and publishes once it is back', async () => {
    await db.prisma.$transaction((tx) => enqueue(tx, shop, cancelled(), new Date()));
    let brokerUp = false;
    let calls = 0;
    const relay = createRelay({
      db: db.prisma,
      backoffInitialMs: 100,
      pollIntervalMs: 20,
      publish: async () => {
        calls += 1;
        if (!brokerUp) throw new Error('connect ECONNREFUSED 127.0.0.1:6379');
      },
    });
    relay.start();
    try {
      const failing = await waitFor(async () => {
        const row = await db.prisma.outboxMessage.findFirstOrThrow();
        return row.attempts >= 2 && row;
      });
      expect(failing).toMatchObject({ publishedAt: null, lastError: 'connect ECONNREFUSED 127.0.0.1:6379' });
      expect(failing.nextAttemptAt.getTime()).toBeGreaterThan(Date.now() - 50);
      const callsWhileDown = calls;
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(calls - callsWhileDown).toBeLessThan(6); // backing off, not spinning every 20 ms

      brokerUp = true;
      const published = await waitFor(async () => {
        const row = await db.prisma.outboxMessage.findFirstOrThrow();
        return row.publishedAt !== null && row;
      });
      expect(published.lastError).toBeNull();
    } finally {
      await relay.stop();
    }
  });

  it('lets one row the broker refuses hold back no other, and parks it after its last attempt, never deleting it', async () => {
    const written = await db.prisma.$transaction(async (tx) => {
      const envelopes = [];
      for (let i = 0; i < 10; i++) envelopes.push(await enqueue(tx, shop, cancelled(), new Date()));
      return envelopes;
    });
    const refused = written[3]!.messageId;
    const published: string[] = [];
    let clock = Date.now();
    const relay = createRelay({
      db: db.prisma,
      maxAttempts: 3,
      now: () => new Date(clock),
      // The broker refuses this one message (a batch holding it is refused whole, as addBulk is).
      publish: async (batch) => {
        if (batch.some((e) => e.messageId === refused)) throw new Error('ERR message refused by the broker');
        published.push(...batch.map((e) => e.messageId));
      },
    });

    expect(await relay.publishBatch()).toMatchObject({ published: 9, error: expect.any(Error) });
    expect(published.sort()).toEqual(
      written
        .map((e) => e.messageId)
        .filter((id) => id !== refused)
        .sort(),
    );
    const row = () => db.prisma.outboxMessage.findUniqueOrThrow({ where: { messageId: refused } });
    expect(await row()).toMatchObject({
      publishedAt: null,
      attempts: 1,
      lastError: 'ERR message refused by the broker',
    });

    // New rows keep flowing while it retries with backoff, then it is parked at its third failure.
    const later = await db.prisma.$transaction((tx) => enqueue(tx, shop, cancelled(), new Date()));
    for (let attempt = 2; attempt <= 3; attempt++) {
      clock += 60_000;
      await relay.publishBatch();
    }
    expect(published).toContain(later.messageId);
    expect(await row()).toMatchObject({ publishedAt: null, attempts: 3 });
    expect(await outboxBacklog(db.prisma)).toMatchObject({ pending: 0, parked: 1 });
    expect((await listParked(db.prisma)).map((r) => r.messageId)).toEqual([refused]);
    clock += 3_600_000;
    expect(await relay.publishBatch()).toEqual({ published: 0 }); // parked: never claimed on its own

    // Once the cause is fixed, an operator gives it back to the relay.
    expect(await retryParked(db.prisma, [refused], new Date(clock))).toBe(1);
    expect(await outboxBacklog(db.prisma)).toMatchObject({ pending: 1, parked: 0 });
  });

  it('wakes on a committed row through LISTEN/NOTIFY instead of waiting for the next poll', async () => {
    const published: string[] = [];
    const relay = createRelay({
      db: db.prisma,
      databaseUrl: db.url,
      pollIntervalMs: 60_000,
      publish: async (batch) => void published.push(...batch.map((e) => e.messageId)),
    });
    relay.start();
    try {
      await new Promise((resolve) => setTimeout(resolve, 300)); // the relay is now asleep for a minute
      const envelope = await db.prisma.$transaction((tx) => enqueue(tx, shop, cancelled(), new Date()));
      await waitFor(() => published.includes(envelope.messageId), { timeoutMs: 5000, what: 'the notified relay' });
    } finally {
      await relay.stop();
    }
  });
});

describe('outbox maintenance', () => {
  it('reports the backlog and the age of the oldest unpublished row', async () => {
    const now = new Date();
    await db.prisma.$transaction(async (tx) => {
      await enqueue(tx, shop, cancelled(), new Date(now.getTime() - 5000));
      await enqueue(tx, shop, cancelled(), now);
    });
    expect(await outboxBacklog(db.prisma, now)).toEqual({ pending: 2, oldestPendingAgeMs: 5000, parked: 0 });
    await db.prisma.outboxMessage.updateMany({ data: { publishedAt: now } });
    expect(await outboxBacklog(db.prisma, now)).toEqual({ pending: 0, oldestPendingAgeMs: 0, parked: 0 });
  });

  it('purges only rows published longer ago than the retention', async () => {
    const now = new Date();
    const old = new Date(now.getTime() - 10_000);
    await db.prisma.$transaction(async (tx) => {
      for (let i = 0; i < 5; i++) await enqueue(tx, shop, cancelled(), old);
      await enqueue(tx, shop, cancelled(), now);
    });
    await db.prisma.outboxMessage.updateMany({ where: { createdAt: old }, data: { publishedAt: old } });
    expect(await purgePublished(db.prisma, { retentionMs: 5000, batchSize: 2, now })).toBe(5);
    expect(await db.prisma.outboxMessage.count()).toBe(1);
  });
});
