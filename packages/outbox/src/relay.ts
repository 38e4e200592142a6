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
  /** How often to look for due rows without a notification. @defaultValue 1000 */
  readonly pollIntervalMs?: number;
  /** First delay after a failed publication; doubles per failure. @defaultValue 250 */
  readonly backoffInitialMs?: number;
  /** Longest delay after failed publications. @defaultValue 30000 */
  readonly backoffMaxMs?: number;
  /** A publication that takes longer counts as failed, so row locks are never held long. @defaultValue 10000 */
  readonly publishTimeoutMs?: number;
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
  attempts: number;
}

export function createRelay<Tx extends SqlClient>(options: RelayOptions<Tx>): Relay {
  const {
    db,
    publish,
    databaseUrl,
    batchSize = 100,
    pollIntervalMs = 1000,
    backoffInitialMs = 250,
    backoffMaxMs = 30_000,
    publishTimeoutMs = 10_000,
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
          SELECT message_id::text, envelope, attempts FROM outbox_messages
           WHERE published_at IS NULL AND next_attempt_at <= ${now()}
           ORDER BY position
           LIMIT ${batchSize}
           FOR UPDATE SKIP LOCKED`;
        if (rows.length === 0) return { published: 0 };
        const ids = rows.map((row) => row.message_id);
        try {
          await withTimeout(publish(rows.map((row) => row.envelope)), publishTimeoutMs);
        } catch (error) {
          const failures = Math.max(...rows.map((row) => row.attempts)) + 1;
          await tx.$executeRaw`
            UPDATE outbox_messages
               SET attempts = attempts + 1, last_error = ${boundReason(String((error as Error)?.message ?? error))},
                   next_attempt_at = ${new Date(now().getTime() + backoff(failures))}
             WHERE message_id = ANY(${ids}::uuid[])`;
          return { published: 0, error };
        }
        // Publish first, mark second. A crash in between publishes these rows again: the
        // accepted duplicate, which every consumer's inbox suppresses. The reverse order
        // could lose them.
        faults.crashIf('crash-after-publish', name);
        await tx.$executeRaw`
          UPDATE outbox_messages SET published_at = ${now()}, attempts = attempts + 1, last_error = NULL
           WHERE message_id = ANY(${ids}::uuid[])`;
        return { published: rows.length };
      },
      { timeout: publishTimeoutMs + 5_000 },
    );
  }

  let running: Promise<void> | undefined;
  let stopping = false;
  let listener: pg.Client | undefined;
  // A notification that arrives while a batch is being published must not be lost: it is
  // remembered, and the next sleep is skipped.
  let notified = false;
  let wake: () => void = () => {};
  const notify = () => {
    notified = true;
    wake();
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

  /** Sleeps for `ms`; a notification ends the sleep early unless the broker is failing. */
  function sleep(ms: number, wakeable: boolean): Promise<void> {
    if (wakeable && notified) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      wake = () => {
        if (!wakeable && !stopping) return;
        clearTimeout(timer);
        resolve();
      };
    });
  }

  async function loop(): Promise<void> {
    let failures = 0;
    while (!stopping) {
      notified = false;
      try {
        const batch = await publishBatch();
        if (batch.error) throw batch.error;
        failures = 0;
        if (batch.published === batchSize) continue;
      } catch (error) {
        failures += 1;
        onError(error);
      }
      await sleep(failures === 0 ? pollIntervalMs : backoff(failures), failures === 0);
      wake = () => {};
    }
  }

  return {
    publishBatch,
    start() {
      if (running) return;
      stopping = false;
      void listen();
      running = loop();
    },
    async stop() {
      stopping = true;
      wake();
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
