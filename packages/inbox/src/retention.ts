import type { SqlClient } from '@idem/database';

/**
 * How far back a message can still arrive. A processed record may only be deleted once no
 * copy of its message can be delivered again, or the copy would be processed a second time.
 */
export interface ReplayHorizon {
  /** How long the broker keeps completed and failed jobs (BullMQ removeOnComplete/removeOnFail age). */
  readonly brokerRetentionMs: number;
  /** The longest span from first delivery to last retry (sum of every backoff delay). */
  readonly maxRetrySpanMs: number;
  /** How long after the fact an operator may still replay a dead letter or republish. */
  readonly replayWindowMs: number;
}

export function replayHorizonMs(horizon: ReplayHorizon): number {
  return horizon.brokerRetentionMs + horizon.maxRetrySpanMs + horizon.replayWindowMs;
}

export class RetentionError extends Error {
  readonly code = 'retention_shorter_than_replay_horizon';
}

export interface InboxRetentionOptions {
  readonly db: SqlClient;
  readonly retentionMs: number;
  readonly horizon: ReplayHorizon;
  /** Rows deleted per statement, so a purge never holds long locks. @defaultValue 1000 */
  readonly batchSize?: number;
  /** @defaultValue () => new Date() */
  readonly now?: () => Date;
}

export interface InboxRetention {
  /** Deletes every processed record older than the retention, batch by batch; returns how many. */
  purge(): Promise<number>;
}

/** Refuses (throws {@link RetentionError}) a retention shorter than the replay horizon. */
export function createInboxRetention(options: InboxRetentionOptions): InboxRetention {
  const { db, retentionMs, horizon, batchSize = 1000, now = () => new Date() } = options;
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
      const cutoff = new Date(now().getTime() - retentionMs);
      let total = 0;
      for (;;) {
        const deleted = await db.$executeRaw`
          DELETE FROM processed_messages
           WHERE (consumer, message_id) IN (
             SELECT consumer, message_id FROM processed_messages
              WHERE processed_at < ${cutoff}
              ORDER BY processed_at
              LIMIT ${batchSize})`;
        total += deleted;
        if (deleted < batchSize) return total;
      }
    },
  };
}
