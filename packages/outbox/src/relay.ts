import type { AnyEnvelope } from '@idem/contracts';
import { fromNodePostgres, listen, type PgTransaction, type SqlClient, type TransactionalClient } from '@idem/database';
import { noFaults, type Faults } from '@idem/faults';
import { claimAndPublish, type BatchSettings, type RelayBatch } from './relay-batch.js';
import pg from 'pg';
import { OUTBOX_CHANNEL } from './enqueue.js';
import { WakeUps } from './wake-ups.js';

export type { RelayBatch };

/** The outbox's database, how it publishes, and how it claims and retries rows. */
export interface RelayOptions<Tx extends SqlClient> {
  /** The service's Prisma client (owner of the outbox_messages table). */
  readonly db: TransactionalClient<Tx>;
  /** Publishes one batch to the broker; resolves only when the broker has accepted all of it. */
  readonly publish: (envelopes: AnyEnvelope[]) => Promise<void>;
  /** When given, the relay LISTENs for new rows and wakes at once; it polls either way. */
  readonly databaseUrl?: string;
  /** Rows claimed and published per transaction. @defaultValue 100 */
  readonly batchSize?: number;
  /**
   * Batches this relay has in flight at once, each its own claim → publish → mark transaction
   * on rows no other holds (SKIP LOCKED): while one batch waits for the broker, the next is
   * claimed. Batches may then reach the broker out of position order, as with several relays.
   * Each batch in flight holds a database connection while it publishes: size the pool for it.
   * @defaultValue 1 (4 reaches 0.74 × raw addBulk: docs/performance.md)
   */
  readonly concurrency?: number;
  /** How often to look for due rows without a notification. @defaultValue 1000 */
  readonly pollIntervalMs?: number;
  /** First delay after a failed publication; doubles per failure. @defaultValue 250 */
  readonly backoffInitialMs?: number;
  /** Longest delay after failed publications. @defaultValue 30000 */
  readonly backoffMaxMs?: number;
  /** A publication that takes longer counts as failed, so row locks are never held long. @defaultValue 10000 */
  readonly publishTimeoutMs?: number;
  /**
   * Failed publications after which a row is **parked**: never claimed again on its own, never
   * deleted, counted in `idem_outbox_parked` and listed for an operator (GET /outbox/parked).
   * @defaultValue 20
   */
  readonly maxAttempts?: number;
  /** Name used by fault switches and logs. @defaultValue 'relay' */
  readonly name?: string;
  readonly faults?: Faults;
  /** @defaultValue () => new Date() */
  readonly now?: () => Date;
  readonly onError?: (error: unknown) => void;
  /** Called after every batch that published rows or failed to (for metrics). */
  readonly onBatch?: (batch: RelayBatch) => void;
}

/** Publishes committed outbox rows to the broker, then marks them published. */
export interface Relay {
  /** Claims one batch of due rows, publishes it, then marks it published. */
  publishBatch(): Promise<RelayBatch>;
  /** Runs until {@link Relay.stop}: publishes while rows are due, sleeps until notified or polled. */
  start(): void;
  stop(): Promise<void>;
}

/** The relay's settings with their defaults: what its loops share. */
interface RelaySettings<Tx extends SqlClient> extends BatchSettings<Tx> {
  readonly pollIntervalMs: number;
  readonly onError: (error: unknown) => void;
  readonly onBatch: (batch: RelayBatch) => void;
  readonly wakeUps: WakeUps;
}

/**
 * The transactional outbox's relay: publishes the rows services enqueued, in position order, in
 * batches of one transaction each (relay-batch.ts), with `concurrency` loops that sleep until
 * notified, polled or — when the broker fails — backed off (wake-ups.ts).
 */
export function createRelay<Tx extends SqlClient>(options: RelayOptions<Tx>): Relay {
  const {
    databaseUrl,
    batchSize = 100,
    concurrency = 1,
    pollIntervalMs = 1000,
    backoffInitialMs = 250,
    backoffMaxMs = 30_000,
    publishTimeoutMs = 10_000,
    maxAttempts = 20,
    name = 'relay',
    faults = noFaults,
    now = () => new Date(),
    onError = () => {},
    onBatch = () => {},
  } = options;
  const relay: RelaySettings<Tx> = {
    db: options.db,
    publish: options.publish,
    batchSize,
    pollIntervalMs,
    backoffInitialMs,
    backoffMaxMs,
    publishTimeoutMs,
    maxAttempts,
    name,
    faults,
    now,
    onError,
    onBatch,
    wakeUps: new WakeUps(),
  };
  let running: Promise<void> | undefined;
  let listener: { close(): Promise<void> } | undefined;
  return {
    publishBatch: () => publishBatch(relay),
    start() {
      if (running) return;
      relay.wakeUps.start();
      if (databaseUrl)
        listener = listen(databaseUrl, OUTBOX_CHANNEL, {
          onNotification: relay.wakeUps.notify,
          retryMs: pollIntervalMs,
          onError,
        });
      running = Promise.all(Array.from({ length: concurrency }, (_, index) => loop(relay, index))).then(() => {});
    },
    async stop() {
      relay.wakeUps.stop();
      await running;
      running = undefined;
      await listener?.close();
      listener = undefined;
    },
  };
}

async function publishBatch<Tx extends SqlClient>(relay: RelaySettings<Tx>): Promise<RelayBatch> {
  const batch = await claimAndPublish(relay);
  if (batch.published > 0 || batch.error) relay.onBatch(batch);
  return batch;
}

/**
 * One of the relay's loops: batch after batch while rows are due. Only the first (`index` 0)
 * polls; the others sleep until a notification or a full batch (more rows are waiting) wakes
 * one, so a light load keeps one loop busy and a backlog all of them.
 */
async function loop<Tx extends SqlClient>(relay: RelaySettings<Tx>, index: number): Promise<void> {
  const { wakeUps, batchSize, pollIntervalMs, backoffInitialMs, backoffMaxMs } = relay;
  let failures = 0;
  while (!wakeUps.stopped) {
    wakeUps.beginBatch();
    try {
      const batch = await publishBatch(relay);
      if (batch.error) throw batch.error;
      failures = 0;
      if (batch.published === batchSize) {
        wakeUps.wakeOne();
        continue;
      }
    } catch (error) {
      failures += 1;
      relay.onError(error);
    }
    const idle = index === 0 ? pollIntervalMs : Infinity;
    const backoff = Math.min(backoffMaxMs, backoffInitialMs * 2 ** Math.max(0, failures - 1));
    await wakeUps.sleep(failures === 0 ? idle : backoff, failures === 0);
  }
}

/** The `application_name` of a pooled relay's connections. */
export const RELAY_POOL_NAME = 'idem relay';

/** Batches a relay on a pool of its own keeps in flight unless told otherwise (docs/benchmarks/log.md, "The relay"). */
export const POOLED_RELAY_CONCURRENCY = 4;

/**
 * A relay as the services run it: on a node-postgres pool of its own, one connection per batch in
 * flight (`concurrency`, @defaultValue {@link POOLED_RELAY_CONCURRENCY}), so while the broker is
 * slow or down its batches hold the relay's connections, never those of the API or the
 * consumers. Stopping it closes the pool.
 */
export function createPooledRelay(options: Omit<RelayOptions<PgTransaction>, 'db'> & { databaseUrl: string }): Relay {
  const concurrency = options.concurrency ?? POOLED_RELAY_CONCURRENCY;
  // Named, so an operator sees the relay's connections apart (pg_stat_activity.application_name).
  const pool = new pg.Pool({
    connectionString: options.databaseUrl,
    max: concurrency,
    application_name: RELAY_POOL_NAME,
  });
  const relay = createRelay({ ...options, concurrency, db: fromNodePostgres(pool) });
  return {
    ...relay,
    async stop() {
      await relay.stop();
      await pool.end();
    },
  };
}
