import type { SqlClient } from '@idem/database';

export interface OutboxBacklog {
  /** Rows not yet published. */
  readonly pending: number;
  /** Age of the oldest unpublished row in milliseconds; 0 when none is pending. */
  readonly oldestPendingAgeMs: number;
}

/** What is waiting to be published, for metrics and health. */
export async function outboxBacklog(db: SqlClient, now: Date = new Date()): Promise<OutboxBacklog> {
  const [row] = await db.$queryRaw<{ pending: number; oldest: Date | null }[]>`
    SELECT count(*)::int AS pending, min(created_at) AS oldest FROM outbox_messages WHERE published_at IS NULL`;
  const oldest = row?.oldest;
  return { pending: row?.pending ?? 0, oldestPendingAgeMs: oldest ? Math.max(0, now.getTime() - oldest.getTime()) : 0 };
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
