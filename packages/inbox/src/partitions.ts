import type { SqlClient } from '@idem/database';

/**
 * processed_messages is partitioned by ranges of message_id (migration
 * tables/inbox/migrations/20261207000000_idem_inbox_partitions). A UUID v7 message id begins with the time its
 * message was made (`newMessageId`, @idem/contracts), so each range partition holds the records of
 * the messages made in one span of time, and retention drops a whole partition where it would
 * otherwise delete its rows one by one. What it optimises: a purge's dead tuples, vacuum and index
 * bloat. What it keeps: the primary key (consumer, message_id) still decides every duplicate — the
 * partition key is part of it, and every copy of a message, having its id, lands in its partition
 * (partitions.int.spec.ts, "across a partition boundary"). Any id no range covers (a UUID v4 from
 * another producer, a time with no partition yet) goes to the DEFAULT partition, which retention
 * purges row by row as before.
 */

/** The span of message times one partition covers. @defaultValue one day */
export const DEFAULT_PARTITION_SPAN_MS = 86_400_000;

/** How many spans after the current one have their partition ready. */
export const PARTITIONS_AHEAD = 2;

/**
 * The constraint a duplicate violates: the primary key of processed_messages, reported by the
 * partition the record is in — `processed_messages_default_pkey`, `processed_messages_p…_pkey`.
 */
export function isProcessedMessagesKey(constraint: string | undefined): boolean {
  return constraint !== undefined && /^processed_messages(_default|_p\d{12})?_pkey$/.test(constraint);
}

export type PartitionAdded = 'added' | 'exists' | 'overlaps' | 'busy';

/**
 * Creates the partitions of the `ahead` spans after the one `now` is in — never the current
 * one, whose records may already be in the DEFAULT partition. A span that overlaps what is
 * there ('overlaps') keeps its ids in the DEFAULT partition: nothing is lost, only the drop. One
 * that could not be checked in time ('busy') is made at the next purge.
 */
export async function addPartitions(
  db: SqlClient,
  now: Date,
  spanMs: number,
  ahead = PARTITIONS_AHEAD,
): Promise<Record<string, PartitionAdded>> {
  const current = Math.floor(now.getTime() / spanMs) * spanMs;
  const results: Record<string, PartitionAdded> = {};
  for (let k = 1; k <= ahead; k++) {
    const from = new Date(current + k * spanMs);
    const [row] = await db.$queryRaw<{ result: PartitionAdded }[]>`
      SELECT idem_inbox_add_partition(${from}, ${new Date(from.getTime() + spanMs)}) AS result`;
    results[from.toISOString()] = row!.result;
  }
  return results;
}

/** A partition retention dropped, with about how many records it held. */
export interface DroppedPartition {
  readonly partition: string;
  readonly records: number;
}

/**
 * Drops every range partition of messages made before `cutoff` none of whose records was
 * processed at or after it — exactly the records a DELETE of those older than the cutoff would
 * remove, so the replay horizon rule is the same. A partition that still holds a recent record
 * (a first delivery of an old message) stays until that record is old too.
 */
export async function dropPartitions(db: SqlClient, cutoff: Date): Promise<DroppedPartition[]> {
  const rows = await db.$queryRaw<{ partition_name: string; records: bigint }[]>`
    SELECT partition_name, records FROM idem_inbox_drop_partitions(${cutoff})`;
  return rows.map((row) => ({ partition: row.partition_name, records: Number(row.records) }));
}
