import { createInboxRetention } from '@idem/inbox';
import { defaultDeliveryPolicy, replayHorizonOf } from '@idem/transport';
import { periodic } from '../periodic.js';
import type { ServicePart } from '../run-service.js';

/**
 * Retention of processed records (role `workers`): those older than INBOX_RETENTION_MS go,
 * whole partitions of them where they can (INBOX_PARTITION_SPAN_MS, @idem/inbox's partitions.ts),
 * and the service refuses to start when that is shorter than the replay horizon — the time in
 * which a copy of a message can still arrive (broker retention, retries, replay window).
 */
export function inboxRetention(): ServicePart {
  return {
    name: 'inbox retention',
    start({ name, config, roles, db, log, metrics }) {
      const retention = createInboxRetention({
        db,
        retentionMs: config.INBOX_RETENTION_MS,
        partitionSpanMs: config.INBOX_PARTITION_SPAN_MS,
        horizon: replayHorizonOf(defaultDeliveryPolicy, config.REPLAY_WINDOW_MS),
      });
      if (!roles.has('workers')) return {};
      const worker = periodic(
        `${name} inbox retention`,
        config.MAINTENANCE_INTERVAL_MS,
        async () => {
          const { deleted, dropped, added } = await retention.purge();
          const inDropped = dropped.reduce((sum, partition) => sum + partition.records, 0);
          metrics.retentionDeleted.inc({ table: 'processed_messages' }, deleted + inDropped);
          return { processedMessagesDeleted: deleted, partitionsDropped: dropped, partitionsAdded: added };
        },
        log,
      );
      worker.start();
      return { stop: () => worker.stop() };
    },
  };
}
