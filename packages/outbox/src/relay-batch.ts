/**
 * One batch of the relay: claim due rows, publish them, mark them published — in one transaction,
 * whose row locks keep every other relay off these rows until it ends.
 */
import type { AnyEnvelope } from '@idem/contracts';
import { boundReason } from '@idem/contracts';
import type { SqlClient, TransactionalClient } from '@idem/database';
import type { Faults } from '@idem/faults';

/** What one batch did. */
export interface RelayBatch {
  readonly published: number;
  /** Rows parked by this batch (they reached `maxAttempts`). */
  readonly parked?: number;
  /** Set when the batch could not be published; its rows stay pending with the error and a retry time. */
  readonly error?: unknown;
}

/** What a batch needs of the relay's settings (see `RelayOptions`). */
export interface BatchSettings<Tx extends SqlClient> {
  readonly db: TransactionalClient<Tx>;
  readonly publish: (envelopes: AnyEnvelope[]) => Promise<void>;
  readonly batchSize: number;
  readonly publishTimeoutMs: number;
  readonly backoffInitialMs: number;
  readonly backoffMaxMs: number;
  readonly maxAttempts: number;
  readonly name: string;
  readonly faults: Faults;
  readonly now: () => Date;
}

interface OutboxRow {
  message_id: string;
  envelope: AnyEnvelope;
}

/** Publication timeouts one claimed batch may spend, one-by-one retries included (its locks are held meanwhile). */
const ONE_BY_ONE_BUDGET = 4;

/**
 * Marks rows published, each at the time it was (a relay batch gives all of its rows one, a
 * handoff each publication its own) and with its attempt counted: the relay's mark and the
 * handoff's, in one statement however many rows.
 */
export async function markPublished(
  db: SqlClient,
  marks: readonly { readonly id: string; readonly at: Date }[],
): Promise<number> {
  return db.$executeRaw`
    UPDATE outbox_messages SET published_at = mark.at, attempts = attempts + 1, last_error = NULL
      FROM unnest(${marks.map((m) => m.id)}::uuid[], ${marks.map((m) => m.at)}::timestamptz[]) AS mark(id, at)
     WHERE message_id = mark.id AND published_at IS NULL`;
}

export async function claimAndPublish<Tx extends SqlClient>(relay: BatchSettings<Tx>): Promise<RelayBatch> {
  const { db, publish, batchSize, publishTimeoutMs, faults, name, now } = relay;
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
        ({ published, failure } = await publishOneByOne(relay, tx, rows, error));
      }
      if (published.length > 0) {
        // Publish first, mark second. A crash in between publishes these rows again: the
        // accepted duplicate, which every consumer's inbox suppresses. The reverse order
        // could lose them.
        faults.crashIf('crash-after-publish', name);
        const at = now();
        await markPublished(
          tx,
          published.map((id) => ({ id, at })),
        );
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
async function publishOneByOne<Tx extends SqlClient>(
  relay: BatchSettings<Tx>,
  tx: SqlClient,
  rows: OutboxRow[],
  batchError: unknown,
) {
  const { publish, publishTimeoutMs } = relay;
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
      parked += await recordFailures(relay, tx, [row], rowError);
    }
  }
  parked += await recordFailures(relay, tx, rows.length === 1 ? rows : rows.slice(next), error);
  return { published, failure: published.length === rows.length ? undefined : { error, parked } };
}

/**
 * One more failed publication for each row: backed off by its own count of failures, or
 * parked at `maxAttempts`. One statement for all of them; says how many it parked.
 */
async function recordFailures<Tx extends SqlClient>(
  { maxAttempts, backoffMaxMs, backoffInitialMs, now }: BatchSettings<Tx>,
  tx: SqlClient,
  rows: readonly OutboxRow[],
  error: unknown,
): Promise<number> {
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

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`publication timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
