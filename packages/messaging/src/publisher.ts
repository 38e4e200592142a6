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
import { Queue, type JobsOptions } from 'bullmq';
import { ReplyError } from 'ioredis';
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
} from './redis.js';
import { subscribersFor, type Note } from './subscriptions.js';

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

/** Adds envelopes to their subscribers' queues, under their message id (`jobId = messageId`). */
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
 * A publisher on the broker: each envelope is added to the queue of every consumer subscribed to
 * its contract (subscriptions.ts) — those its catalogue names, subscribed before its first
 * publication so none of them misses one for having started later, and those that subscribed
 * themselves — under the subscriber's own delivery policy.
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
  const subscribers = subscribersFor(connection, { prefix, redisUrl, fallback: policy });

  // Accepted within `timeoutMs`, or failed, the connection dropped.
  const drop = droppingOnce(connection);
  const accepted = <T>(publication: Promise<T>) => acceptedWithin(publication, timeoutMs, drop);

  return {
    publish: (envelopes) =>
      accepted(
        whenReady(connection).then(() =>
          publish(envelopes, {
            catalogue,
            subscribers,
            queue,
            faults,
            durable: writes.confirm,
            onPublished: options.onPublished,
          }),
        ),
      ),
    durability: writes.resolved,
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
  const { timeoutMs = PUBLISH_TIMEOUT_MS, durabilityTimeoutMs = DURABILITY_TIMEOUT_MS } = options;
  if (durabilityTimeoutMs >= timeoutMs)
    throw new Error(`durabilityTimeoutMs (${durabilityTimeoutMs}) must be shorter than timeoutMs (${timeoutMs})`);
  return { timeoutMs, durabilityTimeoutMs };
}

/**
 * Publishes envelopes to every subscriber's queue, one write per queue, each under its send span
 * (several under one batch span); resolves once Redis has accepted all of them, as durably as
 * asked. The consumers its catalogue names it must reach: a refusal fails the publication. One
 * that subscribed itself and whose queue Redis refuses this producer (its Redis user does not reach
 * it, or a key there is not BullMQ's) is left out, the refusal recorded on the spans: it stops
 * nobody else.
 */
async function publish(
  envelopes: readonly AnyEnvelope[],
  {
    catalogue,
    subscribers,
    queue,
    faults,
    durable,
    onPublished,
  }: Pick<PublisherOptions, 'onPublished' | 'catalogue'> & {
    subscribers: ReturnType<typeof subscribersFor>;
    queue: (consumer: string) => Promise<Queue>;
    faults: Faults;
    durable: (keys: readonly string[]) => Promise<void>;
  },
): Promise<void> {
  if (envelopes.length === 0) return;
  const sent = envelopes.map(startSend);
  const spans = sent.map(({ span }) => span);
  const writeSpan = spans.length === 1 ? spans[0]! : startSendBatch(spans);
  try {
    const byContract = groupBy(sent.map(({ envelope }) => [envelope.type, [envelope]] as const));
    const note: Note = (event, attributes) => spans.forEach((span) => span.addEvent(event, attributes));
    const { subscribers: of, policies } = await subscribers.of(namedIn(catalogue, byContract.keys()), note);
    const byConsumer = groupBy(
      [...byContract].flatMap(([contract, batch]) => of.get(contract)!.map((consumer) => [consumer, batch] as const)),
    );
    // The fault's copy gets another job id, so it reaches the consumer even while the first job
    // still exists: what a relay crash after BullMQ removed the job looks like.
    const twice = faults.fires('publish-twice', 'publisher');
    const writes = () =>
      Promise.all(
        [...byConsumer].map(async ([consumer, batch]) => {
          const to = await queue(consumer);
          try {
            await add(to, jobsOf(batch, policies.get(consumer)!, twice));
            return to;
          } catch (error) {
            // Redis's refusal of a self-subscribed name's queue (out of this producer's reach, keys
            // of the wrong type) stops nobody else; a lost connection fails the publication.
            if (namedBy(catalogue, batch, consumer) || !(error instanceof ReplyError)) throw error;
            note('subscriber out of reach', {
              'idem.consumer': consumer,
              'exception.message': (error as Error).message,
            });
            return undefined;
          }
        }),
      );
    // The Redis writes nest under the publication: its one send span, or a batch span.
    const written = await context.with(trace.setSpan(context.active(), writeSpan), writes);
    // Only a publication as durable as asked counts as published.
    await durable(written.flatMap((to) => (to ? [to.toKey('id')] : [])));
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

/** Each envelope's job under `policy`, and with `twice` a copy under an id of its own. */
const jobsOf = (envelopes: readonly AnyEnvelope[], policy: DeliveryPolicy, twice: boolean) =>
  envelopes.flatMap((envelope) => [
    { name: envelope.type, data: envelope, opts: jobOptions(policy, envelope.messageId) },
    ...(twice
      ? [{ name: envelope.type, data: envelope, opts: jobOptions(policy, `${envelope.messageId}-again`) }]
      : []),
  ]);

/** Envelopes gathered by key, in the order they came. */
function groupBy(pairs: Iterable<readonly [string, readonly AnyEnvelope[]]>): Map<string, AnyEnvelope[]> {
  const groups = new Map<string, AnyEnvelope[]>();
  for (const [key, envelopes] of pairs) {
    const group = groups.get(key);
    if (group) group.push(...envelopes);
    else groups.set(key, [...envelopes]);
  }
  return groups;
}

/** The consumers the catalogue names for each of `contracts`; a contract it does not know is refused. */
const namedIn = (catalogue: Catalogue, contracts: Iterable<string>) =>
  new Map(
    [...contracts].map((contract) => {
      const consumers = catalogue.contracts[contract]?.consumers;
      if (!consumers) throw new Error(`${contract} is not in the catalogue: nobody subscribes to it`);
      return [contract, consumers] as const;
    }),
  );

/** Whether the catalogue names `consumer` a subscriber of one of `envelopes`' contracts. */
const namedBy = (catalogue: Catalogue, envelopes: readonly AnyEnvelope[], consumer: string) =>
  envelopes.some((envelope) =>
    (catalogue.contracts[envelope.type]?.consumers as readonly string[] | undefined)?.includes(consumer),
  );

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
