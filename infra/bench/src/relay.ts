import { subscribersOf, type Envelope, shop } from '@idem/shop';
import {
  createPublisher,
  defaultDeliveryPolicy,
  jobOptions,
  type Durability,
  type PublisherOptions,
} from '@idem/messaging';
import { createPooledRelay } from '@idem/outbox';
import { deleteQueues, orderPlacedMessage } from '@idem/testkit';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import pg from 'pg';
import { timed, type CpuTimes } from './cpu.js';
import { countdown } from './stats.js';

/**
 * Section 2: the outbox relay. Rows of `orders.order-placed.v1` (two subscribers, so fan-out 2)
 * published by idem's relay — claim a batch with SKIP LOCKED, publish, mark — against the
 * same jobs written with BullMQ's raw `addBulk` and nothing else. Like for like: the relay's
 * publication adds to the subscribers' queues as the raw variant does (one hop), and asks Redis
 * one thing more per batch, who subscribes (`SSCAN`).
 */
export type RelayVariant = 'relay' | 'relays' | 'addBulk';

/** Relays running side by side in the `relays` variant (each with its default batches in flight). */
export const SIDE_BY_SIDE = 3;

export interface RelaySample {
  readonly variant: RelayVariant;
  readonly repetition: number;
  readonly rows: number;
  /** Jobs written to BullMQ: rows × subscribers. */
  readonly jobs: number;
  readonly seconds: number;
  readonly rowsPerSecond: number;
  readonly cpu: CpuTimes;
}

export interface RelayOptions {
  readonly databaseUrl: string;
  readonly redisUrl: string;
  readonly queuePrefix: string;
  readonly rows: number;
  readonly repetitions: number;
  /** Rows per relay transaction and per addBulk round. @defaultValue 100 (the relay's default) */
  readonly batchSize?: number;
  readonly log: (line: string) => void;
}

export async function runRelay(options: RelayOptions): Promise<RelaySample[]> {
  const { rows, batchSize = 100 } = options;
  const fanOut = subscribersOf('orders.order-placed.v1').length;
  const admin = new pg.Client({ connectionString: options.databaseUrl });
  await admin.connect();
  const samples: RelaySample[] = [];
  let round = 0;
  try {
    for (let repetition = 0; repetition <= options.repetitions; repetition++) {
      const warmUp = repetition === 0;
      const count = warmUp ? Math.min(500, rows) : rows;
      const envelopes = Array.from({ length: count }, () => orderPlacedMessage());
      for (const variant of ['relay', 'relays', 'addBulk'] as const) {
        const prefix = `${options.queuePrefix}_${++round}`;
        const timing =
          variant === 'addBulk'
            ? await throughAddBulk(envelopes, prefix, options.redisUrl, batchSize)
            : await throughRelays(
                variant === 'relay' ? 1 : SIDE_BY_SIDE,
                admin,
                options.databaseUrl,
                envelopes,
                prefix,
                options.redisUrl,
                batchSize,
              );
        await deleteQueues(prefix);
        const sample = {
          variant,
          repetition,
          rows: count,
          jobs: count * fanOut,
          ...timing,
          rowsPerSecond: count / timing.seconds,
        };
        if (!warmUp) samples.push(sample);
        options.log(
          `${warmUp ? 'warm-up' : `rep ${repetition}`} ${variant.padEnd(7)} ${Math.round(sample.rowsPerSecond)} rows/s (${fanOut} jobs per row)`,
        );
      }
    }
  } finally {
    await admin.end();
  }
  return samples;
}

/**
 * One relay as the services run it, publishing `rows` order-placed rows on `redisUrl` and
 * waiting for each publication to be as durable as `durability` asks: rows per second.
 */
export async function relayRowsPerSecond(options: {
  databaseUrl: string;
  redisUrl: string;
  durability: Durability;
  rows: number;
}): Promise<number> {
  const admin = new pg.Client({ connectionString: options.databaseUrl });
  await admin.connect();
  try {
    const envelopes = Array.from({ length: options.rows }, () => orderPlacedMessage());
    const prefix = `idem_bench_relay_${options.durability}_${Date.now().toString(36)}`;
    const { seconds } = await throughRelays(1, admin, options.databaseUrl, envelopes, prefix, options.redisUrl, 100, {
      durability: options.durability,
    });
    return options.rows / seconds;
  } finally {
    await admin.end();
  }
}

/** `relays` relays started as a service starts its relay, until every row is published. */
async function throughRelays(
  relays: number,
  admin: pg.Client,
  databaseUrl: string,
  envelopes: Envelope[],
  prefix: string,
  redisUrl: string,
  batchSize: number,
  publishing: Pick<PublisherOptions, 'durability'> = {},
) {
  await admin.query('TRUNCATE outbox_messages');
  await admin.query(
    `INSERT INTO outbox_messages (message_id, type, envelope, created_at, next_attempt_at)
     SELECT (e->>'messageId')::uuid, e->>'type', e, now(), now() FROM jsonb_array_elements($1::jsonb) e`,
    [JSON.stringify(envelopes)],
  );
  const publisher = createPublisher({ catalogue: shop, redisUrl, prefix, ...publishing });
  const done = countdown(envelopes.length);
  let failure: unknown;
  const started = Array.from({ length: relays }, () =>
    // As the services run it: a pool of its own and their batches in flight (RELAY_CONCURRENCY).
    createPooledRelay({
      databaseUrl,
      publish: (batch) => publisher.publish(batch),
      batchSize,
      onBatch: (batch) => {
        failure ??= batch.error;
        for (let i = 0; i < batch.published; i++) done.tick();
      },
    }),
  );
  try {
    return await timed(envelopes.length, async () => {
      for (const relay of started) relay.start();
      await done.done;
      if (failure) throw failure;
    });
  } finally {
    await Promise.all(started.map((relay) => relay.stop()));
    await publisher.close();
  }
}

/** The floor: the same jobs, with the same ids and options, straight into the subscriber queues. */
async function throughAddBulk(envelopes: Envelope[], prefix: string, redisUrl: string, batchSize: number) {
  const connection = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  const queues = subscribersOf('orders.order-placed.v1').map((name) => new Queue(name, { connection, prefix }));
  try {
    return await timed(envelopes.length, async () => {
      for (let i = 0; i < envelopes.length; i += batchSize) {
        const jobs = envelopes.slice(i, i + batchSize).map((envelope) => ({
          name: envelope.type,
          data: envelope,
          opts: jobOptions(defaultDeliveryPolicy, envelope.messageId),
        }));
        await Promise.all(queues.map((queue) => queue.addBulk(jobs)));
      }
    });
  } finally {
    await Promise.all(queues.map((queue) => queue.close()));
    connection.disconnect();
  }
}
