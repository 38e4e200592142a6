import type { Catalogue, CatalogueSpec } from '@idem/contracts';
import type { SqlClient } from '@idem/database';
import { bullmq, DeadLetterWriteError, deliveryEntry, publicationEntries, type Publisher } from '@idem/messaging';
import type { Metrics } from '@idem/observability';
import { startIdem, type Idem, type Maintenance, type RelaySettings } from '@idem/service';
import { UnservedSubscriptionError, type DeliveryReport } from '@idem/transport';
import type { BaseConfig } from './config.js';
import { logDelivery, type Logger } from './logger.js';
import type { ServiceContext, ServiceDefinition } from './context.js';

/** What the composition is told about the process it runs in. */
type Process = Pick<ServiceContext, 'config' | 'log' | 'metrics' | 'journal' | 'roles' | 'process' | 'faults'>;

/**
 * The Idempotent Consumer's parts of one process, through the published composition
 * (`@idem/service`'s `startIdem`) on BullMQ: its consumers (role `consumers`), the handoff and
 * the relay on a pool of its own (role `relay`), the retention of processed records and published
 * rows (role `workers`) — every delivery logged, counted and journaled, every publication journaled.
 */
export function startServiceIdem<Tx extends SqlClient, S extends CatalogueSpec>(
  service: ServiceDefinition<Tx, S>,
  { config, log, metrics, journal, roles, process, faults }: Process,
): Idem<Tx, Publisher> {
  const { name, catalogue, db, now } = service;
  return startIdem({
    db,
    catalogue,
    transport: bullmq({
      redisUrl: config.REDIS_URL,
      prefix: config.IDEM_QUEUE_PREFIX,
      durability: config.RELAY_DURABILITY,
      durabilityTimeoutMs: config.RELAY_DURABILITY_TIMEOUT_MS,
      lockDurationMs: config.CONSUMER_LOCK_MS,
      stalledIntervalMs: config.CONSUMER_STALLED_INTERVAL_MS,
    }),
    consumers: service.consumers,
    run: { consumers: roles.has('consumers'), relay: roles.has('relay'), maintenance: roles.has('workers') },
    relay: service.outbox && relayOf(name, config, log, metrics),
    retention: {
      inboxMs: config.INBOX_RETENTION_MS,
      inboxPartitionSpanMs: config.INBOX_PARTITION_SPAN_MS,
      outboxMs: config.OUTBOX_RETENTION_MS,
      intervalMs: config.MAINTENANCE_INTERVAL_MS,
    },
    replayWindowMs: config.REPLAY_WINDOW_MS,
    concurrency: config.CONSUMER_CONCURRENCY,
    faults,
    now,
    onDelivery: (report) => {
      logDelivery(log, report);
      countDelivery(metrics, report, catalogue as unknown as Catalogue);
    },
    onRecorded: (report) => journal.record(deliveryEntry(report, process)),
    onPublished: (envelopes, copies) => {
      for (const entry of publicationEntries(envelopes, copies, process)) journal.record(entry);
    },
    onMaintained: (maintenance) => {
      countMaintenance(metrics, maintenance);
      log.debug({ maintenance }, `${name} maintenance done`);
    },
    onError: (error, part) => {
      if (error instanceof DeadLetterWriteError) metrics.deadLetterWriteFailures.inc({ consumer: error.consumer });
      logIdemError(log, name, error, part);
    },
  });
}

/**
 * A line for what the composition reports through `onError`, as severe as what it is. A consumer
 * that subscribed before any producer declared its contract (a fresh start: consumers come up
 * before their producers) is waiting, not failing: a producer adds the consumers its catalogue
 * names before its first publication, so it receives every one (docs/scaling.md "Subscriptions on Redis").
 */
export function logIdemError(log: Logger, name: string, error: unknown, part: string): void {
  if (error instanceof UnservedSubscriptionError)
    log.info(
      { consumer: error.consumer, contract: error.contract },
      'waiting for a producer: no publication of this contract yet',
    );
  else if (error instanceof DeadLetterWriteError)
    log.error({ err: error, consumer: error.consumer, messageId: error.messageId }, 'dead letter not stored');
  else if (part === 'maintenance') log.warn({ err: error }, `${name} maintenance failed; will try again`);
  else log.error({ err: error, consumer: part }, 'consumer error');
}

/** The relay on a pool of its own, and the handoff after commit (role `relay`): each publication counted. */
function relayOf(name: string, config: BaseConfig, log: Logger, metrics: Metrics): RelaySettings<SqlClient> {
  return {
    name: `${name}.relay`,
    databaseUrl: config.DATABASE_URL,
    ownPool: true,
    concurrency: config.RELAY_CONCURRENCY,
    onError: (error) => log.warn({ err: error }, 'relay: publication failed, backing off'),
    onBatch: (batch) =>
      batch.error ? metrics.relayFailures.inc() : metrics.relayPublished.inc({ by: 'relay' }, batch.published),
    handoff: {
      onError: (error) => log.warn({ err: error }, 'outbox handoff failed: the relay publishes these events'),
      onPublished: (count) => metrics.relayPublished.inc({ by: 'handoff' }, count),
    },
  };
}

function countMaintenance(metrics: Metrics, { inbox, outboxDeleted }: Maintenance): void {
  const inDropped = inbox?.dropped.reduce((sum, partition) => sum + partition.records, 0) ?? 0;
  if (inbox) metrics.retentionDeleted.inc({ table: 'processed_messages' }, inbox.deleted + inDropped);
  if (outboxDeleted !== undefined) metrics.retentionDeleted.inc({ table: 'outbox_messages' }, outboxDeleted);
}

/** Deliveries waiting, running, waiting for a retry, or failed, in each consumer's queue (role `consumers`). */
export function queueGauges(
  { metrics, publisher }: Pick<ServiceContext, 'metrics' | 'publisher'>,
  consumers: string[],
) {
  metrics.gauge(
    'idem_queue_jobs',
    'Deliveries in each consumer queue by state (waiting, active, delayed, failed).',
    ['consumer', 'state'],
    async () =>
      (
        await Promise.all(
          consumers.map(async (consumer) =>
            Object.entries(await publisher.jobCounts(consumer)).map(([state, value]) => ({
              labels: { consumer, state },
              value,
            })),
          ),
        )
      ).flat(),
  );
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
