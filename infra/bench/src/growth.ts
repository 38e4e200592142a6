import { randomUUID } from 'node:crypto';
import { createInboxRetention } from '@idem/inbox';
import { PrismaClient } from '@idem/testkit';
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { percentile } from './stats.js';

/**
 * Section 4: the processed-message table as it grows. At each size, the latency of inserting
 * new records (as deliveries do, 8 at a time) and the size of the table and its indexes; then
 * the same inserts while the inbox retention purges the older half of the table — the cost
 * behind the README's retention advice.
 */
export interface GrowthSample {
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
    await pool.query('TRUNCATE processed_messages');
    for (const size of options.sizes) {
      await fill(pool, size);
      for (const mode of ['off', 'purging'] as const) {
        const purging = mode === 'purging' ? timedPurge(retention.purge) : undefined;
        const latencies = await insertLatencies(pool, options.inserts, purging);
        const purge = await purging;
        const sizes = await sizesOf(pool);
        const sample: GrowthSample = {
          rows: size,
          retention: mode,
          inserts: latencies.each.length,
          p50Ms: round(percentile(latencies.each, 50)),
          p99Ms: round(percentile(latencies.each, 99)),
          insertsPerSecond: Math.round(latencies.each.length / latencies.seconds),
          ...sizes,
          purged: purge?.deleted ?? 0,
          purgeSeconds: purge ? round(purge.seconds) : undefined,
        };
        samples.push(sample);
        options.log(
          `${size.toLocaleString('en')} rows, retention ${mode}: insert p50 ${sample.p50Ms} ms, p99 ${sample.p99Ms} ms; ` +
            `key index ${mb(sample.keyIndexBytes)}${purge ? `; purged ${purge.deleted} in ${round(purge.seconds)} s` : ''}`,
        );
      }
    }
  } finally {
    await prisma.$disconnect();
    await pool.end();
  }
  return samples;
}

/** Tops the table up to `size` rows: half 20 days old (expired), half 1 day old. */
async function fill(pool: pg.Pool, size: number): Promise<void> {
  const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM processed_messages');
  const missing = size - rows[0]!.n;
  if (missing > 0) {
    await pool.query(
      `INSERT INTO processed_messages (consumer, message_id, body_hash, processed_at)
       SELECT $1, gen_random_uuid(), md5(i::text) || md5(i::text),
              now() - CASE WHEN i % 2 = 0 THEN interval '20 days' ELSE interval '1 day' END - i * interval '1 ms'
         FROM generate_series(1, $2) i`,
      [CONSUMER, missing],
    );
  }
  await pool.query('VACUUM ANALYZE processed_messages');
}

/** At least `count` single-record inserts, 8 at a time, and more until `during` settles. */
async function insertLatencies(
  pool: pg.Pool,
  count: number,
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
        [CONSUMER, randomUUID(), '0'.repeat(64)],
      );
      each.push(performance.now() - begun);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, lane));
  return { each, seconds: (performance.now() - start) / 1000 };
}

async function timedPurge(purge: () => Promise<number>): Promise<{ deleted: number; seconds: number }> {
  const start = performance.now();
  const deleted = await purge();
  return { deleted, seconds: (performance.now() - start) / 1000 };
}

async function sizesOf(pool: pg.Pool) {
  const { rows } = await pool.query<{ table: string; key: string; age: string }>(
    `SELECT pg_relation_size('processed_messages')::text AS table,
            pg_relation_size('processed_messages_pkey')::text AS key,
            pg_relation_size('processed_messages_processed_at_idx')::text AS age`,
  );
  const row = rows[0]!;
  return { tableBytes: Number(row.table), keyIndexBytes: Number(row.key), ageIndexBytes: Number(row.age) };
}

const round = (value: number) => Math.round(value * 100) / 100;
const mb = (bytes: number) => `${(bytes / 1_048_576).toFixed(1)} MB`;
