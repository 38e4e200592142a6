import type { Envelope } from '@idem/contracts';
import { boundReason } from '@idem/contracts';
import type { SqlClient, TransactionalClient } from '@idem/database';
import { noFaults, type Faults } from '@idem/faults';
import pg from 'pg';
import { OUTBOX_CHANNEL } from './enqueue.js';

export interface RelayOptions<Tx extends SqlClient> {
  /** The service's Prisma client (owner of the outbox_messages table). */
  readonly db: TransactionalClient<Tx>;
  /** Publishes one batch to the broker; resolves only when the broker has accepted all of it. */
  readonly publish: (envelopes: Envelope[]) => Promise<void>;
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

export interface RelayBatch {
  readonly published: number;
  /** Rows parked by this batch (they reached `maxAttempts`). */
  readonly parked?: number;
  /** Set when the batch could not be published; its rows stay pending with the error and a retry time. */
  readonly error?: unknown;
}

export interface Relay {
  /** Claims one batch of due rows, publishes it, then marks it published. */
  publishBatch(): Promise<RelayBatch>;
  /** Runs until {@link Relay.stop}: publishes while rows are due, sleeps until notified or polled. */
  start(): void;
  stop(): Promise<void>;
}

interface OutboxRow {
  message_id: string;
  envelope: Envelope;
}

/** Publication timeouts one claimed batch may spend, one-by-one retries included (its locks are held meanwhile). */
const ONE_BY_ONE_BUDGET = 4;

export function createRelay<Tx extends SqlClient>(options: RelayOptions<Tx>): Relay {
  const {
    db,
    publish,
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
  const backoff = (failures: number) => Math.min(backoffMaxMs, backoffInitialMs * 2 ** Math.max(0, failures - 1));

  async function publishBatch(): Promise<RelayBatch> {
    const batch = await claimAndPublish();
    if (batch.published > 0 || batch.error) onBatch(batch);
    return batch;
  }

  async function claimAndPublish(): Promise<RelayBatch> {
    return db.$transaction(
      async (tx) => {
        // SKIP LOCKED: relays running side by side each claim different rows; the locks are
        // held until this transaction ends, so no row is published by two relays at once.
        const rows = await tx.$queryRaw<OutboxRow[]>`
          SELECT message_id::text, envelope FROM outbox_messages
           WHERE published_at IS NULL AND next_attempt_at <= ${now()}
           ORDER BY position
           LIMIT ${batchSize}
           FOR UPDATE SKIP LOCKED`;
        if (rows.length === 0) return { published: 0 };
        let published = rows.map((row) => row.message_id);
        let failure: { error: unknown; parked: number } | undefined;
        try {
          await withTimeout(publish(rows.map((row) => row.envelope)), publishTimeoutMs);
        } catch (error) {
          // One row the broker refuses must not hold the others back: publish them one by one,
          // and let each failure count against its own row only.
          ({ published, failure } = await publishOneByOne(tx, rows, error));
        }
        if (published.length > 0) {
          // Publish first, mark second. A crash in between publishes these rows again: the
          // accepted duplicate, which every consumer's inbox suppresses. The reverse order
          // could lose them.
          faults.crashIf('crash-after-publish', name);
          await tx.$executeRaw`
            UPDATE outbox_messages SET published_at = ${now()}, attempts = attempts + 1, last_error = NULL
             WHERE message_id = ANY(${published}::uuid[])`;
        }
        return failure
          ? { published: published.length, error: failure.error, ...(failure.parked ? { parked: failure.parked } : {}) }
          : { published: published.length };
      },
      { timeout: ONE_BY_ONE_BUDGET * publishTimeoutMs + 5_000 },
    );
  }

  /**
   * After a batch failed: each row alone, until the time budget is spent or a few in a row
   * fail (the broker is down, not one row: the rest keep the last error and back off).
   */
  async function publishOneByOne(tx: SqlClient, rows: OutboxRow[], batchError: unknown) {
    const published: string[] = [];
    const deadline = Date.now() + (ONE_BY_ONE_BUDGET - 1) * publishTimeoutMs;
    let error = batchError;
    let consecutive = 0;
    let parked = 0;
    let next = rows.length === 1 ? 1 : 0; // a batch of one already failed alone
    for (; next < rows.length && consecutive < 3 && Date.now() <= deadline; next++) {
      const row = rows[next]!;
      try {
        await withTimeout(publish([row.envelope]), publishTimeoutMs);
        published.push(row.message_id);
        consecutive = 0;
      } catch (rowError) {
        error = rowError;
        consecutive += 1;
        parked += await recordFailures(tx, [row], rowError);
      }
    }
    parked += await recordFailures(tx, rows.length === 1 ? rows : rows.slice(next), error);
    return { published, failure: published.length === rows.length ? undefined : { error, parked } };
  }

  /**
   * One more failed publication for each row: backed off by its own count of failures, or
   * parked at `maxAttempts`. One statement for all of them; says how many it parked.
   */
  async function recordFailures(tx: SqlClient, rows: readonly OutboxRow[], error: unknown): Promise<number> {
    if (rows.length === 0) return 0;
    const updated = await tx.$queryRaw<{ parked: boolean }[]>`
      UPDATE outbox_messages
         SET attempts = attempts + 1, last_error = ${boundReason(String((error as Error)?.message ?? error))},
             next_attempt_at = CASE
               WHEN attempts + 1 >= ${maxAttempts} THEN 'infinity'::timestamptz
               ELSE ${now()}::timestamptz
                    + least(${backoffMaxMs}, ${backoffInitialMs} * power(2, attempts)) * interval '1 millisecond'
             END
       WHERE message_id = ANY(${rows.map((row) => row.message_id)}::uuid[])
       RETURNING next_attempt_at = 'infinity' AS parked`;
    return updated.filter((row) => row.parked).length;
  }

  let running: Promise<void> | undefined;
  let stopping = false;
  let listener: pg.Client | undefined;
  // A notification that arrives while a batch is being published must not be lost: it is
  // remembered, and the next sleep is skipped.
  let notified = false;
  const sleepers = new Set<(notification: boolean) => boolean>();
  /** Wakes one loop sleeping until rows are due; a loop backing off from a failing broker stays asleep. */
  const wakeOne = () => {
    for (const wake of sleepers) if (wake(true)) return;
  };
  const notify = () => {
    notified = true;
    wakeOne();
  };

  async function listen(): Promise<void> {
    if (!databaseUrl || stopping) return;
    const client = new pg.Client({ connectionString: databaseUrl });
    const retry = () => {
      if (listener === client) listener = undefined;
      client.end().catch(() => {});
      if (!stopping) setTimeout(() => void listen(), pollIntervalMs);
    };
    client.on('notification', notify);
    client.on('error', (error) => {
      onError(error);
      retry();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${OUTBOX_CHANNEL}`);
      listener = client;
      notify(); // rows written while nobody was listening
    } catch (error) {
      onError(error);
      retry();
    }
  }

  /**
   * Sleeps for `ms` (forever for Infinity); a wake-up for due rows ends the sleep early unless the
   * broker is failing; stopping always does.
   */
  function sleep(ms: number, wakeable: boolean): Promise<void> {
    // A loop that comes to sleep after stop() woke the sleepers must not sleep at all.
    if (stopping || (wakeable && notified)) return Promise.resolve();
    return new Promise((resolve) => {
      const wake = (notification: boolean) => {
        if (notification && !wakeable) return false;
        clearTimeout(timer);
        sleepers.delete(wake);
        resolve();
        return true;
      };
      const timer = ms === Infinity ? undefined : setTimeout(() => wake(false), ms);
      sleepers.add(wake);
    });
  }

  /**
   * One of the relay's `concurrency` loops: batch after batch while rows are due. Only the first
   * polls; the others sleep until a notification or a full batch (more rows are waiting) wakes
   * one, so a light load keeps one loop busy and a backlog all of them.
   */
  async function loop(index: number): Promise<void> {
    let failures = 0;
    while (!stopping) {
      notified = false;
      try {
        const batch = await publishBatch();
        if (batch.error) throw batch.error;
        failures = 0;
        if (batch.published === batchSize) {
          wakeOne();
          continue;
        }
      } catch (error) {
        failures += 1;
        onError(error);
      }
      const idle = index === 0 ? pollIntervalMs : Infinity;
      await sleep(failures === 0 ? idle : backoff(failures), failures === 0);
    }
  }

  return {
    publishBatch,
    start() {
      if (running) return;
      stopping = false;
      void listen();
      running = Promise.all(Array.from({ length: concurrency }, (_, index) => loop(index))).then(() => {});
    },
    async stop() {
      stopping = true;
      for (const wake of sleepers) wake(false);
      await running;
      running = undefined;
      await listener?.end().catch(() => {});
      listener = undefined;
    },
  };
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`publication timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
