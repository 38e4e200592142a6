import type { SqlClient } from '@idem/database';

/** How far the relay is behind: the number and age of unpublished rows. */
export interface OutboxBacklog {
  /** Rows not yet published, parked ones aside. */
  readonly pending: number;
  /** Age of the oldest of those in milliseconds; 0 when none is pending. */
  readonly oldestPendingAgeMs: number;
  /** Rows the relay parked after its `maxAttempts`: waiting for an operator. */
  readonly parked: number;
}

/** What is waiting to be published, for metrics and health. */
export async function outboxBacklog(db: SqlClient, now: Date = new Date()): Promise<OutboxBacklog> {
  const [row] = await db.$queryRaw<{ pending: number; oldest: Date | null; parked: number }[]>`
    SELECT count(*) FILTER (WHERE next_attempt_at <> 'infinity')::int AS pending,
           min(created_at) FILTER (WHERE next_attempt_at <> 'infinity') AS oldest,
           count(*) FILTER (WHERE next_attempt_at = 'infinity')::int AS parked
      FROM outbox_messages WHERE published_at IS NULL`;
  const oldest = row?.oldest;
  return {
    pending: row?.pending ?? 0,
    oldestPendingAgeMs: oldest ? Math.max(0, now.getTime() - oldest.getTime()) : 0,
    parked: row?.parked ?? 0,
  };
}

/** An outbox row the relay parked after the broker kept refusing it: it waits for an operator. */
export interface ParkedRow {
  readonly messageId: string;
  readonly type: string;
  readonly attempts: number;
  readonly lastError: string | null;
  readonly createdAt: Date;
}

/** Rows the relay parked (a publication that kept failing), oldest first. They are never deleted. */
export async function listParked(db: SqlClient, limit = 100): Promise<ParkedRow[]> {
  const rows = await db.$queryRaw<
    { message_id: string; type: string; attempts: number; last_error: string | null; created_at: Date }[]
  >`
    SELECT message_id::text, type, attempts, last_error, created_at FROM outbox_messages
     WHERE published_at IS NULL AND next_attempt_at = 'infinity' ORDER BY position LIMIT ${limit}`;
  return rows.map((r) => ({
    messageId: r.message_id,
    type: r.type,
    attempts: r.attempts,
    lastError: r.last_error,
    createdAt: r.created_at,
  }));
}

/** Gives parked rows (all, or the ones named) back to the relay with fresh attempts; returns how many. */
export async function retryParked(
  db: SqlClient,
  messageIds?: readonly string[],
  now: Date = new Date(),
): Promise<number> {
  const ids = messageIds ? [...messageIds] : null;
  return await db.$executeRaw`
    UPDATE outbox_messages SET attempts = 0, next_attempt_at = ${now}
     WHERE published_at IS NULL AND next_attempt_at = 'infinity'
       AND (${ids}::uuid[] IS NULL OR message_id = ANY(${ids}::uuid[]))`;
}

/** Deletes rows published longer ago than the retention, in batches; returns how many. */
export async function purgePublished(
  db: SqlClient,
  { retentionMs, batchSize = 1000, now = new Date() }: { retentionMs: number; batchSize?: number; now?: Date },
): Promise<number> {
  const cutoff = new Date(now.getTime() - retentionMs);
  let total = 0;
  for (;;) {
    const deleted = await db.$executeRaw`
      DELETE FROM outbox_messages
       WHERE message_id IN (
         SELECT message_id FROM outbox_messages WHERE published_at < ${cutoff} LIMIT ${batchSize})`;
    total += deleted;
    if (deleted < batchSize) return total;
  }
}
