import type { Catalogue, CatalogueSpec, ConsumerName, MessageOf } from '@idem/contracts';
import type { SqlClient } from '@idem/database';
import type { Inbox, MessageHandler } from '@idem/inbox';
import {
  DeadLetterWriteError,
  deliveryEntry,
  startConsumer,
  type Consumer,
  type ConsumerOptions,
  type DeliveryReport,
} from '@idem/messaging';
import type { Metrics } from '@idem/observability';
import { logDelivery } from '../logger.js';
import type { ServicePart } from '../run-service.js';

type RunnerOptions<Tx extends SqlClient> = Omit<
  ConsumerOptions<Tx, CatalogueSpec, string>,
  'consumer' | 'handler' | 'catalogue'
>;

/** One subscription of a service: a consumer name of its catalogue and its handler, typed together. */
export interface ConsumerSpec<Tx extends SqlClient> {
  readonly consumer: string;
  readonly start: (options: RunnerOptions<Tx>) => Consumer;
}

export function consumer<Tx extends SqlClient, S extends CatalogueSpec, C extends ConsumerName<S>>(
  catalogue: Catalogue<S>,
  name: C,
  handler: MessageHandler<Tx, MessageOf<S, NoInfer<C>>>,
): ConsumerSpec<Tx> {
  return { consumer: name, start: (options) => startConsumer({ ...options, catalogue, consumer: name, handler }) };
}

/**
 * The service's consumers (role `consumers`), each on its own queue, all through one inbox:
 * every delivery is logged, counted, and journaled once it is settled.
 */
export function consumers<Tx extends SqlClient>(inbox: Inbox<Tx>, specs: readonly ConsumerSpec<Tx>[]): ServicePart<Tx> {
  return {
    name: `consumers (${specs.length})`,
    start({ catalogue, config, roles, faults, log, metrics, journal, publisher, process }) {
      if (!roles.has('consumers')) return {};
      const running: Consumer[] = specs.map((spec) =>
        spec.start({
          redisUrl: config.REDIS_URL,
          prefix: config.IDEM_QUEUE_PREFIX,
          inbox,
          faults,
          concurrency: config.CONSUMER_CONCURRENCY,
          lockDurationMs: config.CONSUMER_LOCK_MS,
          stalledIntervalMs: config.CONSUMER_STALLED_INTERVAL_MS,
          onDelivery: (report) => {
            logDelivery(log, report);
            countDelivery(metrics, report, catalogue);
          },
          onRecorded: (report) => journal.record(deliveryEntry(report, process)),
          onError: (error) => {
            if (error instanceof DeadLetterWriteError) {
              metrics.deadLetterWriteFailures.inc({ consumer: error.consumer });
              log.error({ err: error, consumer: error.consumer, messageId: error.messageId }, 'dead letter not stored');
            } else log.error({ err: error, consumer: spec.consumer }, 'consumer error');
          },
        }),
      );
      metrics.gauge(
        'idem_queue_jobs',
        'Deliveries in each consumer queue by state (waiting, active, delayed, failed).',
        ['consumer', 'state'],
        async () =>
          (
            await Promise.all(
              specs.map(async ({ consumer }) =>
                Object.entries(await publisher.jobCounts(consumer)).map(([state, value]) => ({
                  labels: { consumer, state },
                  value,
                })),
              ),
            )
          ).flat(),
      );
      return { stop: async () => void (await Promise.all(running.map((c) => c.close()))) };
    },
  };
}

function countDelivery(metrics: Metrics, report: DeliveryReport, catalogue: Catalogue): void {
  const contract = report.contract ?? 'unknown';
  metrics.deliveries.inc({
    consumer: report.consumer,
    contract,
    // The producer the catalogue names for the contract: a label never comes from a message's free text.
    producer: (report.contract && catalogue.contracts[report.contract]?.producer) || 'unknown',
    outcome: report.outcome.outcome,
  });
  metrics.processingSeconds.observe({ consumer: report.consumer, contract }, report.durationMs / 1000);
  if (report.deadLettered) {
    const code =
      report.outcome.outcome === 'transient_failure'
        ? 'retries_exhausted'
        : 'code' in report.outcome
          ? report.outcome.code
          : 'unknown';
    metrics.deadLetters.inc({ consumer: report.consumer, code });
  }
}
