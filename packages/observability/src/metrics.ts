import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/**
 * The Prometheus metrics every service exposes on GET /metrics. Labels are bounded sets
 * (service, consumer, contract, producer, outcome, code, status): message ids, order ids and
 * e-mail addresses never become labels, they would make the series unbounded.
 */
export interface Metrics {
  readonly registry: Registry;
  readonly deliveries: Counter<'consumer' | 'contract' | 'producer' | 'outcome'>;
  readonly processingSeconds: Histogram<'consumer' | 'contract'>;
  readonly deadLetters: Counter<'consumer' | 'code'>;
  readonly deadLetterWriteFailures: Counter<'consumer'>;
  readonly relayPublished: Counter;
  readonly relayFailures: Counter;
  readonly retentionDeleted: Counter<'table'>;
  /** Operator actions by operation and how they ended (done, refused, rejected, failed). */
  readonly operatorActions: Counter<'action' | 'outcome'>;
  /** A gauge whose values are read (e.g. from the database) at each scrape. */
  gauge<L extends string>(
    name: string,
    help: string,
    labelNames: readonly L[],
    read: () => Promise<readonly { labels: Record<L, string>; value: number }[]>,
  ): void;
  /** The text Prometheus scrapes. */
  scrape(): Promise<{ contentType: string; body: string }>;
}

// eslint-disable-next-line max-lines-per-function -- every metric idem exports, declared in one list
export function createMetrics(service: string): Metrics {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  // The event loop's delay is sampled every 100 ms rather than prom-client's 10: each sample wakes
  // the process, and at 10 ms an idle service spent about as much CPU on them as on everything else.
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 100 });
  const registers = [registry];
  return {
    registry,
    deliveries: new Counter({
      name: 'idem_deliveries_total',
      help: 'Deliveries handled, by consumer, contract, producer and outcome (processed, duplicate, conflicting_duplicate, stale, transient_failure, permanent_failure).',
      labelNames: ['consumer', 'contract', 'producer', 'outcome'],
      registers,
    }),
    processingSeconds: new Histogram({
      name: 'idem_delivery_processing_seconds',
      help: 'Time from the start of handling to the end of the inbox transaction.',
      labelNames: ['consumer', 'contract'],
      buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    }),
    operatorActions: new Counter({
      name: 'idem_operator_actions_total',
      help: 'Operator actions, by operation (METHOD /path) and outcome: done, refused (not an operator), rejected (bad request), failed.',
      labelNames: ['action', 'outcome'],
      registers,
    }),
    deadLetters: new Counter({
      name: 'idem_dead_letters_total',
      help: 'Deliveries that ended as dead letters, by consumer and reason code.',
      labelNames: ['consumer', 'code'],
      registers,
    }),
    deadLetterWriteFailures: new Counter({
      name: 'idem_dead_letter_write_failures_total',
      help: 'Dead letters that could not be stored (their jobs stay failed in BullMQ): needs a person.',
      labelNames: ['consumer'],
      registers,
    }),
    relayPublished: new Counter({
      name: 'idem_relay_published_total',
      help: 'Outbox rows published: by the writer right after its commit (handoff) or by the relay.',
      labelNames: ['by'],
      registers,
    }),
    relayFailures: new Counter({
      name: 'idem_relay_publish_failures_total',
      help: 'Relay batches that failed to publish (and will be retried).',
      registers,
    }),
    retentionDeleted: new Counter({
      name: 'idem_retention_deleted_total',
      help: 'Rows deleted by retention, by table (processed_messages, outbox_messages).',
      labelNames: ['table'],
      registers,
    }),
    gauge(name, help, labelNames, read) {
      new Gauge({
        name,
        help,
        labelNames: [...labelNames],
        registers,
        async collect() {
          this.reset();
          for (const { labels, value } of await read()) this.set(labels as never, value);
        },
      });
    },
    async scrape() {
      return { contentType: registry.contentType, body: await registry.metrics() };
    },
  };
}
