import type { AnyEnvelope, Catalogue, CatalogueSpec, ConsumerName, MessageOf } from '@idem/contracts';
import type { SqlClient } from '@idem/database';
import type { Faults } from '@idem/faults';
import type { Inbox, MessageHandler } from '@idem/inbox';
import { ConsumerRunner, type DeliveryReport } from './consumer-runner.js';
import type { DeliveryPolicy } from './delivery-policy.js';

/**
 * The seam between the pattern and a broker. A transport publishes each message to the consumers
 * that subscribed to its contract, taking it as published only once the broker accepted it, and
 * runs a consumer: each delivery through a `ConsumerRunner` (the inbox), settled after the commit,
 * retried with the policy's backoff, a dead letter stored in the inbox's table. `@idem/messaging`
 * is BullMQ's (`bullmq({ redisUrl })`), `@idem/rabbitmq` RabbitMQ's (`rabbitmq({ url })`); the code
 * around them is the same.
 */
export interface Transport<P extends Publisher = Publisher> {
  /** OpenTelemetry's `messaging.system`: `bullmq`, `rabbitmq`. */
  readonly system: string;
  /** How deliveries are retried and kept: the inbox's replay horizon is derived from it (`replayHorizonOf`). */
  readonly policy: DeliveryPolicy;
  /** A publisher of this broker (`@idem/messaging`'s also counts a consumer's queued deliveries). */
  createPublisher(options: PublisherOptions): P;
  /**
   * Declares at the broker what a consumer subscribes to, without taking deliveries: from then on
   * what is published to those contracts waits for it (`startConsumer` does this too). Run it when
   * a consumer is deployed, before the producers' next event it must not miss.
   */
  subscribe(options: { readonly catalogue: Catalogue; readonly consumer: string }): Promise<void>;
  startConsumer<Tx extends SqlClient, S extends CatalogueSpec, C extends ConsumerName<S>>(
    options: ConsumerOptions<Tx, S, C>,
  ): Consumer;
}

/** What a publisher on any transport is given. */
export interface PublisherOptions {
  /** The contracts published, and their schemas. */
  readonly catalogue: Catalogue;
  /** `publish-twice` (target `publisher`) sends a second copy of each message. @defaultValue none */
  readonly faults?: Faults;
  /** Told of every publication once the broker took it, with how many copies went out (the journal). */
  readonly onPublished?: (envelopes: readonly AnyEnvelope[], copies: number) => void;
  /**
   * How long a publication waits for the broker's acceptance. Past it the publication fails and
   * its connection is taken for dead and dropped, so the next one opens another: behind a dead
   * link nothing closes a connection for the client (no FIN, no RST), and without this every
   * publication would wait on it until a heartbeat or the kernel ended it, minutes later.
   * @defaultValue 10000
   */
  readonly timeoutMs?: number;
}

/** Puts envelopes on the broker under their message id. */
export interface Publisher {
  /** Publishes each envelope to its contract's subscribers; resolves once the broker accepted all of them. */
  publish(envelopes: readonly AnyEnvelope[]): Promise<void>;
  /** Delivers a payload again to one consumer under the same message id (dead-letter replay). */
  redeliver(consumer: string, messageId: string, payload: unknown): Promise<void>;
  close(): Promise<void>;
}

/** What a consumer on any transport is given: the catalogue, its name, its inbox and its handler. */
export interface ConsumerOptions<Tx extends SqlClient, S extends CatalogueSpec, C extends ConsumerName<S>> {
  /** The system's catalogue: the contracts this consumer subscribes to, and their schemas. */
  readonly catalogue: Catalogue<S>;
  /** Its stable name: its queue's, and half of the inbox's dedupe key. */
  readonly consumer: C;
  readonly inbox: Inbox<Tx>;
  readonly handler: MessageHandler<Tx, MessageOf<S, NoInfer<C>>>;
  /** Deliveries handled at once by this instance; keep it within the database pool. @defaultValue 8 */
  readonly concurrency?: number;
  /**
   * Group commit: deliveries this instance handles at the same time share one inbox transaction
   * and one commit (`inbox.consumeBatch`), at most this many; each stays all-or-nothing on its
   * own, and every one is settled only after the shared commit. 1 gives every delivery its own
   * transaction. @defaultValue concurrency
   */
  readonly maxBatch?: number;
  readonly faults?: Faults;
  /** A delivery larger than this (as JSON) is dead-lettered unread. @defaultValue 262144 */
  readonly maxPayloadBytes?: number;
  readonly onDelivery?: (report: DeliveryReport) => void;
  /**
   * Called once the broker has recorded how a delivery ended (settled it, scheduled its retry, or
   * dropped it as a dead letter), with the same report; never for a delivery whose process died
   * before. For records that must not slow or affect the delivery (the journal).
   */
  readonly onRecorded?: (report: DeliveryReport) => void;
  /** Errors of the consumer itself (its broker connection, a dead-letter write). */
  readonly onError?: (error: unknown) => void;
}

/** A running consumer. */
export interface Consumer {
  /** Resolves once the consumer has subscribed and takes deliveries (its queue and bindings declared). */
  readonly ready: Promise<void>;
  /** Stops taking deliveries; waits up to `timeoutMs` for in-flight ones, then abandons them to redelivery. */
  close(timeoutMs?: number): Promise<void>;
}

/** The contracts a consumer subscribes to, as the catalogue says; a consumer of nothing is refused. */
export function subscriptionsOf(catalogue: Catalogue, consumer: string): readonly string[] {
  const contracts = (catalogue.consumers as Record<string, readonly string[] | undefined>)[consumer];
  if (!contracts) throw new Error(`${consumer} subscribes to nothing in the catalogue`);
  return contracts;
}

/** A subscription no producer serves yet: the consumer runs, and receives from the first publication on. */
export class UnservedSubscriptionError extends Error {
  readonly code = 'unserved_subscription';
  constructor(
    readonly consumer: string,
    readonly contract: string,
  ) {
    super(
      `${consumer} subscribes to ${contract}, which no producer has declared yet: ` +
        `it receives what is published from now on, nothing from before`,
    );
  }
}

/** The consumer runner of a consumer's options, on the transport named `system`. */
export function consumerRunnerOf<Tx extends SqlClient, S extends CatalogueSpec, C extends ConsumerName<S>>(
  options: ConsumerOptions<Tx, S, C>,
  system: string,
): ConsumerRunner<Tx> {
  const { consumer, inbox, concurrency = 8, maxBatch = concurrency } = options;
  // The handler takes the contracts this consumer subscribes to; the runner hands it only
  // envelopes parsed against them.
  const handler = options.handler as unknown as MessageHandler<Tx, AnyEnvelope>;
  const catalogue = options.catalogue as unknown as Catalogue;
  return new ConsumerRunner({
    system,
    catalogue,
    consumer,
    inbox,
    handler,
    contracts: subscriptionsOf(catalogue, consumer),
    maxBatch,
    maxPayloadBytes: options.maxPayloadBytes ?? 256 * 1024,
    faults: options.faults,
    onDelivery: options.onDelivery,
    onError: options.onError,
  });
}

/** How long a publication waits for the broker's acceptance by default (`PublisherOptions.timeoutMs`), as long as the relay's. */
export const PUBLISH_TIMEOUT_MS = 10_000;

/**
 * A publication, failed once `timeoutMs` passed without the broker's acceptance. `drop` is called
 * before the failure is told, so the publication the failure prompts (the relay's retry) opens a
 * new connection rather than wait on the dead one (see `PublisherOptions.timeoutMs`). What the
 * broker accepts later is a copy the relay publishes again: the accepted duplicate.
 */
export function acceptedWithin<T>(publication: Promise<T>, timeoutMs: number, drop: () => void): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      drop();
      reject(new Error(`the broker accepted nothing within ${timeoutMs} ms: its connection was dropped`));
    }, timeoutMs);
  });
  return Promise.race([publication, late]).finally(() => clearTimeout(timer));
}
