import type { SqlClient } from '@idem/database';
import {
  addPartitions,
  DEFAULT_PARTITION_SPAN_MS,
  dropPartitions,
  type DroppedPartition,
  type PartitionAdded,
} from './partitions.js';

/**
 * How far back a message can still arrive. A processed record may only be deleted once no
 * copy of its message can be delivered again, or the copy would be processed a second time.
 */
export interface ReplayHorizon {
  /** How long the broker keeps a delivered or failed message, so may still hand out a copy of it. */
  readonly brokerRetentionMs: number;
  /** The longest span from first delivery to last retry (sum of every backoff delay). */
  readonly maxRetrySpanMs: number;
  /** How long after the fact an operator may still replay a dead letter or republish. */
  readonly replayWindowMs: number;
}

/** How long after the fact a message can still arrive: broker retention + retry span + replay window. */
export function replayHorizonMs(horizon: ReplayHorizon): number {
  return horizon.brokerRetentionMs + horizon.maxRetrySpanMs + horizon.replayWindowMs;
}

/** The inbox retention is shorter than the replay horizon: a late copy would find no record and apply twice. */
export class RetentionError extends Error {
  readonly code = 'retention_shorter_than_replay_horizon';
}

/** How long records are kept, and the horizon that retention must cover. */
export interface InboxRetentionOptions {
  readonly db: SqlClient;
  readonly retentionMs: number;
  readonly horizon: ReplayHorizon;
  /** Rows deleted per statement, so a purge never holds long locks. @defaultValue 1000 */
  readonly batchSize?: number;
  /** The span of message times a partition covers (partitions.ts). @defaultValue one day */
  readonly partitionSpanMs?: number;
  /** @defaultValue () => new Date() */
  readonly now?: () => Date;
}

/** What one purge did. */
export interface Purge {
  /** Records deleted row by row, from the DEFAULT partition (partitions.ts). */
  readonly deleted: number;
  /** Partitions dropped whole, each with about how many records it held. */
  readonly dropped: readonly DroppedPartition[];
  /** The partitions of the coming spans, by the start of their span. */
  readonly added: Readonly<Record<string, PartitionAdded>>;
}

/** Removes processed records once no copy of their message can arrive any more. */
export interface InboxRetention {
  /**
   * Removes the processed records older than the retention: the partitions of the coming spans
   * made first, then each range partition dropped whole once all its records are that old, then
   * the DEFAULT partition's deleted batch by batch.
   */
  purge(): Promise<Purge>;
}

/** Refuses (throws {@link RetentionError}) a retention shorter than the replay horizon. */
export function createInboxRetention(options: InboxRetentionOptions): InboxRetention {
  const {
    db,
    retentionMs,
    horizon,
    batchSize = 1000,
    partitionSpanMs = DEFAULT_PARTITION_SPAN_MS,
    now = () => new Date(),
  } = options;
  const minimum = replayHorizonMs(horizon);
  if (!(retentionMs >= minimum)) {
    throw new RetentionError(
      `inbox retention ${retentionMs} ms is shorter than the replay horizon ${minimum} ms ` +
        `(broker retention ${horizon.brokerRetentionMs} + retry span ${horizon.maxRetrySpanMs} + ` +
        `replay window ${horizon.replayWindowMs}); a redelivered message could then be processed twice`,
    );
  }
  return {
    async purge() {
      const at = now();
      const cutoff = new Date(at.getTime() - retentionMs);
      const added = await addPartitions(db, at, partitionSpanMs);
      const dropped = await dropPartitions(db, cutoff);
      let deleted = 0;
      for (;;) {
        const batch = await db.$executeRaw`
          DELETE FROM processed_messages_default
           WHERE (consumer, message_id) IN (
             SELECT consumer, message_id FROM processed_messages_default
              WHERE processed_at < ${cutoff}
              ORDER BY processed_at
              LIMIT ${batchSize})`;
        deleted += batch;
        if (batch < batchSize) return { deleted, dropped, added };
      }
    },
  };
}
