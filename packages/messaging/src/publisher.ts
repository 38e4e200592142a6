import { contextOf, traceparentOf, type AnyEnvelope, type Catalogue } from '@idem/contracts';
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
import { Queue } from 'bullmq';
import { jobOptions } from './delivery-policy.js';
import { DURABILITY_TIMEOUT_MS, durableWrites, type DURABILITIES, type Durability } from './durability.js';
import {
  clusterReady,
  createRedis,
  whenReady,
  droppingOnce,
  queueName,
  resolveBroker,
  type BrokerOptions,
  type RedisClient,
} from './redis.js';
import { backlogOf, entryOf, streamOf, subscribe, trimStream } from './subscriptions.js';

/** A publisher's options on BullMQ: the transport's, its Redis, its delivery policy and durability. */
export interface PublisherOptions extends AnyPublisherOptions, BrokerOptions {
  /**
   * How the jobs it adds again to its own service's queues (dead-letter replays) are retried and
   * kept; what it publishes runs under each consumer's own. @defaultValue defaultDeliveryPolicy
   */
  readonly policy?: DeliveryPolicy;
  /** What "published" waits for (durability.ts). @defaultValue 'auto' */
  readonly durability?: (typeof DURABILITIES)[number];
  /** How long a publication waits for it before it fails (and is published again). @defaultValue 1000 */
  readonly durabilityTimeoutMs?: number;
}

/** Appends envelopes to their contracts' streams; the consumers' subscriptions forward them to their queues, under their message id (`jobId = messageId`). */
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

/**
 * A publisher on the broker: each envelope is appended to its contract's stream, from where each
 * subscribing consumer forwards it to its own queue (subscriptions.ts). The consumers its catalogue
 * names are subscribed before its first publication of a contract, so none of them misses one for
 * having started later.
 */
export function createPublisher(options: PublisherOptions): Publisher {
  const { redisUrl, prefix } = resolveBroker(options);
  const policy = options.policy ?? defaultDeliveryPolicy;
  const faults = options.faults ?? noFaults;
  const { catalogue } = options;
  const { timeoutMs, durabilityTimeoutMs } = timeoutsOf(options);
  const connection = createRedis(redisUrl, 'producer', timeoutMs);
  const writes = durableWrites(connection, options.durability ?? 'auto', durabilityTimeoutMs);
  const queues = new Map<string, Queue>();
  const queue = async (consumer: string) => {
    await clusterReady(connection);
    let q = queues.get(consumer);
    if (!q) queues.set(consumer, (q = new Queue(queueName(consumer, redisUrl), { connection, prefix })));
    return q;
  };
  const streams = streamsOf(connection, prefix, catalogue);

  // Accepted within `timeoutMs`, or failed, the connection dropped.
  const drop = droppingOnce(connection);
  const accepted = <T>(publication: Promise<T>) => acceptedWithin(publication, timeoutMs, drop);

  return {
    publish: (envelopes) =>
      accepted(
        publish(connection, envelopes, {
          streams,
          faults,
          durable: writes.confirm,
          onPublished: options.onPublished,
        }),
      ),
    durability: writes.resolved,
    redeliver: async (consumer, messageId, payload) =>
      accepted(redeliver(await queue(consumer), policy, messageId, payload)),
    async jobCounts(consumer) {
      const counts = await (await queue(consumer)).getJobCounts('waiting', 'active', 'delayed', 'failed');
      // What its subscriptions hold that it has not forwarded to its queue yet waits too.
      const contracts = (catalogue.consumers as Record<string, readonly string[] | undefined>)[consumer] ?? [];
      const forwarding = await Promise.all(
        contracts.map((contract) => backlogOf(connection, prefix, contract, consumer)),
      );
      return {
        waiting: (counts.waiting ?? 0) + forwarding.reduce((sum, n) => sum + n, 0),
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

/** How often, at most, a publisher trims a stream it publishes to. */
const TRIM_EVERY_MS = 5_000;

/**
 * The streams of a publisher's contracts: each declared once, before its first entry, with every
 * consumer the catalogue names subscribed (the subscriptions it knows of; others bring their own),
 * and trimmed now and then after a publication.
 */
function streamsOf(redis: RedisClient, prefix: string, catalogue: Catalogue) {
  const declared = new Map<string, Promise<void>>();
  const trimmedAt = new Map<string, number>();
  return {
    async declare(contract: string): Promise<string> {
      const consumers = catalogue.contracts[contract]?.consumers;
      if (!consumers) throw new Error(`${contract} is not in the catalogue: nobody subscribes to it`);
      let done = declared.get(contract);
      if (!done) {
        done = whenReady(redis)
          .then(() => Promise.all(consumers.map((consumer) => subscribe(redis, prefix, contract, consumer))))
          .then(() => undefined);
        declared.set(contract, done);
        done.catch(() => declared.delete(contract)); // declared again next time
      }
      await done;
      return streamOf(prefix, contract);
    },
    /** Trims `contract`'s stream if it was not for a while; never fails the publication that asked. */
    trim(contract: string): void {
      if (Date.now() - (trimmedAt.get(contract) ?? 0) < TRIM_EVERY_MS) return;
      trimmedAt.set(contract, Date.now());
      trimStream(redis, prefix, contract).catch(() => trimmedAt.delete(contract));
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
  const { timeoutMs = PUBLISH_TIMEOUT_MS, durabilityTimeoutMs = DURABILITY_TIMEOUT_MS } = options;
  if (durabilityTimeoutMs >= timeoutMs)
    throw new Error(`durabilityTimeoutMs (${durabilityTimeoutMs}) must be shorter than timeoutMs (${timeoutMs})`);
  return { timeoutMs, durabilityTimeoutMs };
}

/**
 * Appends envelopes to their contracts' streams, one write per stream, each under its send span
 * (several under one batch span); resolves once Redis has accepted all of them, as durably as asked.
 */
async function publish(
  redis: RedisClient,
  envelopes: readonly AnyEnvelope[],
  {
    streams,
    faults,
    durable,
    onPublished,
  }: Pick<PublisherOptions, 'onPublished'> & {
    streams: ReturnType<typeof streamsOf>;
    faults: Faults;
    durable: (streams: readonly string[]) => Promise<void>;
  },
): Promise<void> {
  if (envelopes.length === 0) return;
  const spans: Span[] = [];
  const byContract = new Map<string, AnyEnvelope[]>();
  for (const produced of envelopes) {
    const { span, envelope } = startSend(produced);
    spans.push(span);
    const batch = byContract.get(envelope.type);
    if (batch) batch.push(envelope);
    else byContract.set(envelope.type, [envelope]);
  }
  const writeSpan = spans.length === 1 ? spans[0]! : startSendBatch(spans);
  try {
    // The fault's copy is forwarded under another job id, so it reaches the consumer even while
    // the first job still exists: what a relay crash after BullMQ removed the job looks like.
    const twice = faults.fires('publish-twice', 'publisher');
    const entries = (envelope: AnyEnvelope) => [entryOf(envelope), ...(twice ? [entryOf(envelope, true)] : [])];
    const written = await Promise.all(
      [...byContract].map(async ([contract, batch]) => ({
        contract,
        stream: await streams.declare(contract),
        batch,
      })),
    );
    const writes = () => Promise.all(written.map(({ stream, batch }) => append(redis, stream, batch.flatMap(entries))));
    // The Redis writes nest under the publication: its one send span, or a batch span.
    await context.with(trace.setSpan(context.active(), writeSpan), writes);
    await durable(written.map(({ stream }) => stream)); // only a publication as durable as asked counts as published
    onPublished?.(envelopes, twice ? 2 : 1);
    for (const { contract } of written) streams.trim(contract);
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

/** Entries onto one stream in one round trip (one key: one slot of a cluster). */
async function append(redis: RedisClient, stream: string, entries: string[][]): Promise<void> {
  if (entries.length === 1) {
    await redis.xadd(stream, '*', ...entries[0]!);
    return;
  }
  const pipeline = redis.pipeline();
  for (const fields of entries) pipeline.xadd(stream, '*', ...fields);
  for (const [error] of (await pipeline.exec()) ?? []) if (error) throw error;
}
