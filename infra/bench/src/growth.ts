import { randomUUID } from 'node:crypto';
import { newMessageId } from '@idem/contracts';
import { createInboxRetention, type Purge } from '@idem/inbox';
import { PrismaClient } from '@idem/testkit';
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { percentile } from './stats.js';

/**
 * Section 4: the processed-message table as it grows. At each size, the latency of inserting
 * new records (as deliveries do, 8 at a time) and the size of the table and its indexes; then
 * the same inserts while the inbox retention purges the older half of the table — the cost
 * behind docs/operations.md "Choosing the inbox retention". Twice: with UUID v4 ids, which all
 * stay in the DEFAULT partition and are purged row by row (the table as it was before
 * partitions), and with UUID v7 ids in partitions of a day, which retention drops whole
 * (@idem/inbox, partitions.ts).
 */
export interface GrowthSample {
  /** How the older half goes: deleted in batches, or its partition dropped. */
  readonly purgeBy: PurgeBy;
  readonly rows: number;
  readonly retention: 'off' | 'purging';
  readonly inserts: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly insertsPerSecond: number;
  readonly tableBytes: number;
  /** The primary key `(consumer, message_id)`. */
  readonly keyIndexBytes: number;
  /** The `processed_at` index the retention purge walks. */
  readonly ageIndexBytes: number;
  /** Rows the purge deleted while the inserts ran (0 without retention). */
  readonly purged: number;
  readonly purgeSeconds?: number;
}

export interface GrowthOptions {
  readonly databaseUrl: string;
  readonly sizes: readonly number[];
  /** Inserts timed at each size. */
  readonly inserts: number;
  readonly log: (line: string) => void;
}

export type PurgeBy = 'delete' | 'drop';
export const PURGE_BY: readonly PurgeBy[] = ['delete', 'drop'];

const CONSUMER = 'bench.growth.v1';
const DAY_MS = 86_400_000;
const CONCURRENCY = 8;

export async function runGrowth(options: GrowthOptions): Promise<GrowthSample[]> {
  const pool = new pg.Pool({ connectionString: options.databaseUrl, max: CONCURRENCY + 1 });
  const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: options.databaseUrl, max: 2 }) });
  // A 10-day retention with no broker retention, retries or replay window: the older half of
  // every fill (20 days old) is expired, the newer half (1 day old) is not.
  const retention = createInboxRetention({
    db: prisma,
    retentionMs: 10 * DAY_MS,
    horizon: { brokerRetentionMs: 0, maxRetrySpanMs: 0, replayWindowMs: 0 },
  });
  const samples: GrowthSample[] = [];
  try {
    for (const purgeBy of PURGE_BY) {
      await pool.query('TRUNCATE processed_messages');
      for (const size of options.sizes) {
        // Again at each size: the purge before dropped the partitions of the days it expired.
        if (purgeBy === 'drop') await dailyPartitions(pool);
        await fill(pool, size, purgeBy);
        for (const mode of ['off', 'purging'] as const) {
          const purging = mode === 'purging' ? timedPurge(retention.purge) : undefined;
          const latencies = await insertLatencies(pool, options.inserts, purgeBy, purging);
          const purge = await purging;
          const sample: GrowthSample = {
            purgeBy,
            rows: size,
            retention: mode,
            inserts: latencies.each.length,
            p50Ms: round(percentile(latencies.each, 50)),
            p99Ms: round(percentile(latencies.each, 99)),
            insertsPerSecond: Math.round(latencies.each.length / latencies.seconds),
            ...(await sizesOf(pool)),
            purged: purge?.removed ?? 0,
            purgeSeconds: purge ? round(purge.seconds) : undefined,
          };
          samples.push(sample);
          options.log(
            `${size.toLocaleString('en')} rows by ${purgeBy}, retention ${mode}: insert p50 ${sample.p50Ms} ms, p99 ${sample.p99Ms} ms; ` +
              `key index ${mb(sample.keyIndexBytes)}${purge ? `; purged ${purge.removed} in ${round(purge.seconds)} s` : ''}`,
          );
        }
      }
    }
    await pool.query('TRUNCATE processed_messages');
  } finally {
    await prisma.$disconnect();
    await pool.end();
  }
  return samples;
}

/**
 * The partitions of a day from 22 days ago to 2 days ahead, as retention would have made them
 * ahead of each day (the DEFAULT partition is empty, so none overlaps it).
 */
async function dailyPartitions(pool: pg.Pool): Promise<void> {
  const today = Math.floor(Date.now() / DAY_MS) * DAY_MS;
  for (let day = -22; day <= 2; day++) {
    const from = new Date(today + day * DAY_MS);
    await pool.query('SELECT idem_inbox_add_partition($1, $2)', [from, new Date(from.getTime() + DAY_MS)]);
  }
}

/**
 * Tops the table up to `size` rows: half 20 days old (expired), half 1 day old. Their ids are
 * UUID v4 (`delete`) or UUID v7 of the time they were processed at (`drop`), made in SQL the way
 * `newMessageId` makes them: the time in milliseconds, then random.
 */
async function fill(pool: pg.Pool, size: number, purgeBy: PurgeBy): Promise<void> {
  const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM processed_messages');
  const missing = size - rows[0]!.n;
  if (missing > 0) {
    const id =
      purgeBy === 'delete'
        ? 'gen_random_uuid()'
        : `(lpad(to_hex(floor(extract(epoch FROM at) * 1000)::bigint), 12, '0') || '7' || substr(r, 1, 3) || '8' || substr(r, 4, 15))::uuid`;
    await pool.query(
      `INSERT INTO processed_messages (consumer, message_id, body_hash, processed_at)
       SELECT $1, ${id}, md5(i::text) || md5(i::text), at
         FROM (SELECT i, md5(random()::text) AS r,
                      now() - CASE WHEN i % 2 = 0 THEN interval '20 days' ELSE interval '1 day' END - i * interval '1 ms' AS at
                 FROM generate_series(1, $2) i) AS t`,
      [CONSUMER, missing],
    );
  }
  await pool.query('VACUUM ANALYZE processed_messages');
}

/** At least `count` single-record inserts, 8 at a time, and more until `during` ends. */
async function insertLatencies(
  pool: pg.Pool,
  count: number,
  purgeBy: PurgeBy,
  during?: Promise<unknown>,
): Promise<{ each: number[]; seconds: number }> {
  let busy = during !== undefined;
  const idle = () => (busy = false);
  void during?.then(idle, idle);
  const each: number[] = [];
  const start = performance.now();
  const lane = async () => {
    while (each.length < count || busy) {
      const begun = performance.now();
      await pool.query(
        `INSERT INTO processed_messages (consumer, message_id, body_hash, processed_at) VALUES ($1, $2, $3, now())`,
        [CONSUMER, purgeBy === 'delete' ? randomUUID() : newMessageId(new Date()), '0'.repeat(64)],
      );
      each.push(performance.now() - begun);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, lane));
  return { each, seconds: (performance.now() - start) / 1000 };
}

/** How long a purge took, and how many records went: deleted, or in the partitions it dropped. */
async function timedPurge(purge: () => Promise<Purge>): Promise<{ removed: number; seconds: number }> {
  const start = performance.now();
  const { deleted, dropped } = await purge();
  const removed = deleted + dropped.reduce((sum, partition) => sum + partition.records, 0);
  return { removed, seconds: (performance.now() - start) / 1000 };
}

/** The table and its two indexes, every partition included. */
async function sizesOf(pool: pg.Pool) {
  const { rows } = await pool.query<{ table: string; key: string; age: string }>(
    `SELECT (SELECT sum(pg_relation_size(relid)) FROM pg_partition_tree('processed_messages'))::text AS table,
            (SELECT sum(pg_relation_size(relid)) FROM pg_partition_tree('processed_messages_pkey'))::text AS key,
            (SELECT sum(pg_relation_size(relid)) FROM pg_partition_tree('processed_messages_processed_at_idx'))::text AS age`,
  );
  const row = rows[0]!;
  return { tableBytes: Number(row.table), keyIndexBytes: Number(row.key), ageIndexBytes: Number(row.age) };
}

const round = (value: number) => Math.round(value * 100) / 100;
const mb = (bytes: number) => `${(bytes / 1_048_576).toFixed(1)} MB`;
