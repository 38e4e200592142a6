import { contextOf, traceparentOf, type AnyEnvelope } from '@idem/contracts';
import { context, SpanKind, SpanStatusCode, trace, type Span } from '@opentelemetry/api';
import { noFaults, type Faults } from '@idem/faults';
import {
  acceptedWithin,
  defaultDeliveryPolicy,
  PUBLISH_TIMEOUT_MS,
  type DeliveryPolicy,
  type Publisher as AnyPublisher,
  type PublisherOptions as AnyPublisherOptions,
} from '@idem/transport';
import { Queue, type JobsOptions } from 'bullmq';
import { jobOptions } from './delivery-policy.js';
import { confirmDurable, resolveDurability, type DURABILITIES, type Durability } from './durability.js';
import { clusterReady, createRedis, droppingOnce, queueName, resolveBroker, type BrokerOptions } from './redis.js';

/** A publisher's options on BullMQ: the transport's, its Redis, its delivery policy and durability. */
export interface PublisherOptions extends AnyPublisherOptions, BrokerOptions {
  /** How the jobs are retried and kept. @defaultValue defaultDeliveryPolicy */
  readonly policy?: DeliveryPolicy;
  /** What "published" waits for (durability.ts). @defaultValue 'auto' */
  readonly durability?: (typeof DURABILITIES)[number];
  /** How long a publication waits for it before it fails (and is published again). @defaultValue 1000 */
  readonly durabilityTimeoutMs?: number;
}

/** Puts envelopes on the consumers' queues, under their message id (`jobId = messageId`). */
export interface Publisher extends AnyPublisher {
  /** How many of a consumer's deliveries wait, run, wait for a retry, or have failed. */
  jobCounts(consumer: string): Promise<Record<'waiting' | 'active' | 'delayed' | 'failed', number>>;
  /** What "published" waits for, `auto` resolved. */
  durability(): Promise<Durability>;
}

const tracer = trace.getTracer('@idem/messaging');

/**
 * A `send` span per message, a child of the context the event was produced in (recorded in
 * the envelope when it was written to the outbox). Its own context replaces the envelope's
 * traceparent, so each consumer's span links to this publication.
 */
function startSend(envelope: AnyEnvelope): { span: Span; envelope: AnyEnvelope } {
  const parent = contextOf(envelope.traceparent) ?? context.active();
  const span = tracer.startSpan(
    `send ${envelope.type}`,
    {
      kind: SpanKind.PRODUCER,
      attributes: {
        'messaging.system': 'bullmq',
        'messaging.operation.type': 'send',
        'messaging.operation.name': 'send',
        'messaging.destination.name': envelope.type,
        'messaging.message.id': envelope.messageId,
        'idem.producer': envelope.producer,
        'idem.correlation_id': envelope.correlationId,
        ...(envelope.causationId ? { 'idem.causation_id': envelope.causationId } : {}),
      },
    },
    parent,
  );
  const traceparent = traceparentOf(trace.setSpan(parent, span));
  return { span, envelope: traceparent ? { ...envelope, traceparent } : envelope };
}

/**
 * The span a batch of publications is written to Redis under, linked to each message's `send`
 * span (OpenTelemetry's batch sending): one MULTI carries many messages, and its Redis spans
 * need one parent.
 */
function startSendBatch(spans: Span[]): Span {
  return tracer.startSpan('send', {
    kind: SpanKind.PRODUCER,
    links: spans.map((span) => ({ context: span.spanContext() })),
    attributes: {
      'messaging.system': 'bullmq',
      'messaging.operation.type': 'send',
      'messaging.operation.name': 'send',
      'messaging.batch.message_count': spans.length,
    },
  });
}

/** A publisher on the broker: each envelope goes to the queue of every consumer the catalogue subscribes to it. */
export function createPublisher(options: PublisherOptions): Publisher {
  const { redisUrl, prefix } = resolveBroker(options);
  const policy = options.policy ?? defaultDeliveryPolicy;
  const faults = options.faults ?? noFaults;
  const { timeoutMs, durabilityTimeoutMs } = timeoutsOf(options);
  const connection = createRedis(redisUrl, 'producer', timeoutMs);
  // Resolved on the first publication, once Redis can say whether it has a replica.
  let durability: Promise<Durability> | undefined;
  const resolved = () =>
    (durability ??= resolveDurability(connection, options.durability ?? 'auto').catch((error: unknown) => {
      durability = undefined; // asked again next time
      throw error;
    }));
  const durable = async (written: readonly Queue[]) =>
    confirmDurable(
      connection,
      await resolved(),
      durabilityTimeoutMs,
      written.map((q) => q.toKey('id')),
    );
  const queues = new Map<string, Queue>();
  const queue = async (consumer: string) => {
    await clusterReady(connection);
    let q = queues.get(consumer);
    if (!q) queues.set(consumer, (q = new Queue(queueName(consumer, redisUrl), { connection, prefix })));
    return q;
  };

  // Accepted within `timeoutMs`, or failed, the connection dropped.
  const drop = droppingOnce(connection);
  const accepted = <T>(publication: Promise<T>) => acceptedWithin(publication, timeoutMs, drop);

  return {
    publish: (envelopes) =>
      accepted(
        publish(queue, envelopes, {
          catalogue: options.catalogue,
          policy,
          faults,
          durable,
          onPublished: options.onPublished,
        }),
      ),
    durability: resolved,
    redeliver: async (consumer, messageId, payload) =>
      accepted(redeliver(await queue(consumer), policy, messageId, payload)),
    async jobCounts(consumer) {
      const counts = await (await queue(consumer)).getJobCounts('waiting', 'active', 'delayed', 'failed');
      return {
        waiting: counts.waiting ?? 0,
        active: counts.active ?? 0,
        delayed: counts.delayed ?? 0,
        failed: counts.failed ?? 0,
      };
    },
    async close() {
      await Promise.all([...queues.values()].map((q) => q.close()));
      connection.disconnect();
    },
  };
}

/** Adds `payload` to `queue` again under `messageId` (dead-letter replay). */
async function redeliver(queue: Queue, policy: DeliveryPolicy, messageId: string, payload: unknown): Promise<void> {
  // A dead-lettered job may still sit in BullMQ's failed set under this id, and an add with an
  // existing id is ignored: remove it first so the replay is really delivered.
  await (await queue.getJob(messageId))?.remove();
  const type = (payload as { type?: unknown } | null)?.type;
  await queue.add(typeof type === 'string' ? type : 'unknown', payload, jobOptions(policy, messageId));
}

/** The publisher's two timeouts; a WAIT as long as `timeoutMs` would take its connection for dead. */
function timeoutsOf(options: PublisherOptions): { timeoutMs: number; durabilityTimeoutMs: number } {
  const { timeoutMs = PUBLISH_TIMEOUT_MS, durabilityTimeoutMs = 1000 } = options;
  if (durabilityTimeoutMs >= timeoutMs)
    throw new Error(`durabilityTimeoutMs (${durabilityTimeoutMs}) must be shorter than timeoutMs (${timeoutMs})`);
  return { timeoutMs, durabilityTimeoutMs };
}

/**
 * Publishes envelopes to every subscriber's queue, one write per queue (`add`), each under its send
 * span (several under one batch span); resolves once Redis has accepted all of them.
 */
async function publish(
  queue: (consumer: string) => Promise<Queue>,
  envelopes: readonly AnyEnvelope[],
  {
    catalogue,
    policy,
    faults,
    durable,
    onPublished,
  }: Pick<PublisherOptions, 'onPublished' | 'catalogue'> & {
    policy: DeliveryPolicy;
    faults: Faults;
    durable: (written: readonly Queue[]) => Promise<void>;
  },
): Promise<void> {
  if (envelopes.length === 0) return;
  const spans: Span[] = [];
  const byConsumer = new Map<string, AnyEnvelope[]>();
  for (const produced of envelopes) {
    const { span, envelope } = startSend(produced);
    spans.push(span);
    const contract = catalogue.contracts[envelope.type];
    if (!contract) throw new Error(`${envelope.type} is not in the catalogue: nobody subscribes to it`);
    for (const consumer of contract.consumers) {
      const batch = byConsumer.get(consumer);
      if (batch) batch.push(envelope);
      else byConsumer.set(consumer, [envelope]);
    }
  }
  const writeSpan = spans.length === 1 ? spans[0]! : startSendBatch(spans);
  try {
    // The fault's copy gets another job id, so it reaches the consumer even while the
    // first job still exists: what a relay crash after BullMQ removed the job looks like.
    const twice = faults.fires('publish-twice', 'publisher');
    const jobs = (envelope: AnyEnvelope) => [
      { name: envelope.type, data: envelope, opts: jobOptions(policy, envelope.messageId) },
      ...(twice
        ? [{ name: envelope.type, data: envelope, opts: jobOptions(policy, `${envelope.messageId}-again`) }]
        : []),
    ];
    const written = await Promise.all(
      [...byConsumer].map(async ([consumer, batch]) => ({ to: await queue(consumer), batch })),
    );
    const writes = () => Promise.all(written.map(({ to, batch }) => add(to, batch.flatMap(jobs))));
    // The Redis writes nest under the publication: its one send span, or a batch span.
    await context.with(trace.setSpan(context.active(), writeSpan), writes);
    await durable(written.map(({ to }) => to)); // only a publication as durable as asked counts as published
    onPublished?.(envelopes, twice ? 2 : 1);
  } catch (error) {
    for (const span of spans) {
      span.recordException(error as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
    }
    throw error;
  } finally {
    for (const span of spans) span.end();
    if (writeSpan !== spans[0]) writeSpan.end();
  }
}

/**
 * Jobs onto one queue in one round trip. A single job goes as one script call: `addBulk` would
 * wrap it in an ioredis pipeline, and making one copies every BullMQ script onto it (the
 * publishing services' profile charged ~0.4 ms an order to that alone).
 */
function add(queue: Queue, jobs: { name: string; data: AnyEnvelope; opts: JobsOptions }[]): Promise<unknown> {
  if (jobs.length !== 1) return queue.addBulk(jobs);
  const { name, data, opts } = jobs[0]!;
  return queue.add(name, data, opts);
}
