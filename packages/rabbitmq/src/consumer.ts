import type { CatalogueSpec, ConsumerName } from '@idem/contracts';
import type { SqlClient } from '@idem/database';
import { noFaults, type Faults } from '@idem/faults';
import {
  backoffMs,
  consumerRunnerOf,
  messageIdOf,
  subscriptionsOf,
  type Consumer,
  type ConsumerOptions,
  type ConsumerRunner,
  type DeliveryPolicy,
  type DeliveryReport,
  type Received,
  UnservedSubscriptionError,
} from '@idem/transport';
import type { Channel, ChannelModel, ConfirmChannel, ConsumeMessage } from 'amqplib';
import { openConnection, type Endpoint } from './connection.js';
import {
  bindSubscriptions,
  deadQueueOf,
  declareConsumer,
  declareRetryQueue,
  queueOf,
  redeliveryExchangeOf,
  retryExchangeOf,
  type Names,
} from './topology.js';
import { unroutedOf } from './confirms.js';
import { UnboundSubscriptionError } from './unbound-subscription-error.js';

/**
 * The header that counts a message's attempts (1 for the first delivery); the retry copy carries
 * the next. Read only on what came back through the consumer's own redelivery exchange.
 */
export const ATTEMPT_HEADER = 'x-idem-attempt';

/** What a consumer on RabbitMQ adds to any transport's: how often a dying consumer may be handed a message. */
export interface RabbitConsumerSettings {
  readonly endpoint: Endpoint;
  readonly names: Names;
  readonly policy: DeliveryPolicy;
  /** Redeliveries after a consumer died holding a message before it is a dead letter. */
  readonly deliveryLimit: number;
}

/** An open connection: the channel deliveries come on, the one retries are written on, and the consumer tags. */
interface Session {
  readonly model: ChannelModel;
  readonly channel: Channel;
  /** Where retries are written, confirmed before the delivery they replace is acknowledged. */
  readonly retries: ConfirmChannel;
  readonly tags: string[];
}

/**
 * Runs one consumer on RabbitMQ: it declares its quorum queue and binds it to the exchange of each
 * contract it subscribes to, takes `concurrency` deliveries at a time, and acknowledges each only
 * after its inbox transaction ended. A retry is a copy written (confirmed) to a queue where it waits
 * its backoff, before the delivery is acknowledged; a consumer that dies leaves its deliveries to be
 * handed out again; one handed out more than `deliveryLimit` times, and every dead letter, ends in
 * the inbox's dead-letter table.
 */
export function startRabbitConsumer<Tx extends SqlClient, S extends CatalogueSpec, C extends ConsumerName<S>>(
  settings: RabbitConsumerSettings,
  options: ConsumerOptions<Tx, S, C>,
): Consumer {
  const consumer = new RabbitConsumer(settings, consumerRunnerOf(options, 'rabbitmq'), {
    contracts: subscriptionsOf(options.catalogue as never, options.consumer),
    concurrency: options.concurrency ?? 8,
    onRecorded: options.onRecorded,
    onError: options.onError ?? (() => {}),
    faults: options.faults ?? noFaults,
  });
  const ready = consumer.start();
  ready.catch((error: unknown) => consumer.failedToStart(error));
  return { ready, close: (timeoutMs = 10_000) => consumer.close(ready, timeoutMs) };
}

class RabbitConsumer<Tx extends SqlClient> {
  readonly #settings: RabbitConsumerSettings;
  readonly #consumer: string;
  readonly #concurrency: number;
  readonly #runner: ConsumerRunner<Tx>;
  readonly #contracts: readonly string[];
  readonly #onRecorded: ((report: DeliveryReport) => void) | undefined;
  readonly #onError: (error: unknown) => void;
  readonly #faults: Faults;
  /** The retry queues declared on this connection (one per delay). */
  readonly #retryQueues = new Set<number>();
  /** The deliveries being settled: close() waits for them. */
  readonly #inFlight = new Set<Promise<void>>();
  #closing = false;
  #session: Session | undefined;

  constructor(
    settings: RabbitConsumerSettings,
    runner: ConsumerRunner<Tx>,
    options: {
      contracts: readonly string[];
      concurrency: number;
      onRecorded: ((report: DeliveryReport) => void) | undefined;
      onError: (error: unknown) => void;
      faults: Faults;
    },
  ) {
    this.#settings = settings;
    this.#consumer = runner.consumer;
    this.#runner = runner;
    this.#concurrency = options.concurrency;
    this.#contracts = options.contracts;
    this.#onRecorded = options.onRecorded;
    this.#onError = options.onError;
    this.#faults = options.faults;
  }

  /** Connects, declares the queue and its bindings, and starts taking deliveries. */
  async start(): Promise<void> {
    const { endpoint, names, deliveryLimit } = this.#settings;
    // A handshake not answered in time fails, and is tried again (failedToStart), as behind a dead
    // link; once open, the heartbeat (connection.ts) ends a connection that hears nothing.
    const model = await openConnection(endpoint, CONNECT_TIMEOUT_MS);
    model.on('error', this.#onError);
    this.#retryQueues.clear(); // a queue deleted meanwhile is declared again
    try {
      const channel = await model.createChannel();
      const retries = await model.createConfirmChannel();
      // A channel RabbitMQ closes (a refused declaration, a failed confirm) ends the session: the
      // whole connection is closed and opened again, never left half working.
      for (const opened of [channel, retries]) {
        opened.on('error', this.#onError);
        opened.on('close', () => void model.close().catch(() => {}));
      }
      await declareConsumer(channel, names, this.#consumer, deliveryLimit);
      const { missing, unbound } = await bindSubscriptions(model, names, this.#consumer, this.#contracts);
      for (const contract of missing)
        this.#onError(
          unbound.includes(contract)
            ? new UnboundSubscriptionError(this.#consumer, contract)
            : new UnservedSubscriptionError(this.#consumer, contract),
        );
      this.#bindWhenDeclared(model, unbound);
      await channel.prefetch(this.#concurrency);
      // RabbitMQ cancels a consumption whose queue was deleted: the session ends, and the next one
      // declares the queue again and binds it, without a restart.
      const cancelled = () => {
        this.#onError(new Error(`${this.#consumer}: RabbitMQ cancelled its deliveries (a queue deleted?)`));
        void model.close().catch(() => {});
      };
      const tags = [
        (
          await channel.consume(queueOf(names, this.#consumer), (m) =>
            m ? this.#deliver(channel, retries, m) : cancelled(),
          )
        ).consumerTag,
        (await channel.consume(deadQueueOf(names, this.#consumer), (m) => (m ? this.#bury(channel, m) : cancelled())))
          .consumerTag,
      ];
      this.#session = { model, channel, retries, tags };
    } catch (error) {
      await model.close().catch(() => {}); // not left open beside the next attempt's
      throw error;
    }
    model.on('close', () => {
      if (this.#session?.model === model) this.#session = undefined;
      if (this.#closing) return;
      this.failedToStart(new Error(`${this.#consumer}: the connection to RabbitMQ closed; connecting again`));
    });
    if (this.#closing) await model.close();
  }

  /**
   * Binds the subscriptions its user could not declare once their producers did, checking every
   * second while the connection lasts (a reconnection starts over): the exchange is the
   * producer's, and only its producer's user may declare it.
   */
  #bindWhenDeclared(model: ChannelModel, contracts: readonly string[]): void {
    let closed = false;
    model.on('close', () => (closed = true));
    const check = (pending: readonly string[]) => {
      if (pending.length === 0) return;
      setTimeout(() => {
        if (closed || this.#closing) return;
        bindSubscriptions(model, this.#settings.names, this.#consumer, pending, { declare: false }).then(
          ({ unbound }) => check(unbound),
          (error: unknown) => {
            this.#onError(error);
            check(pending);
          },
        );
      }, SUBSCRIPTION_CHECK_MS).unref();
    };
    check(contracts);
  }

  /** Says why it is not running, and starts again in a second (until it is closed). */
  failedToStart(error: unknown): void {
    this.#onError(error);
    setTimeout(() => {
      if (!this.#closing) this.start().catch((again: unknown) => this.failedToStart(again));
    }, 1000).unref();
  }

  /** Stops taking deliveries; in-flight ones finish, up to the timeout; the rest are handed out again. */
  async close(ready: Promise<void>, timeoutMs: number): Promise<void> {
    this.#closing = true;
    await ready.catch(() => {});
    const current = this.#session;
    if (!current) return;
    await Promise.all(current.tags.map((tag) => current.channel.cancel(tag))).catch(() => {});
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
    await Promise.race([Promise.all(this.#inFlight), timeout]);
    clearTimeout(timer);
    await current.model.close().catch(() => {});
  }

  #deliver(channel: Channel, retries: ConfirmChannel, message: ConsumeMessage): void {
    const settling = this.#settleHolding(channel, retries, message)
      .catch(this.#onError) // an onRecorded that threw: the delivery is settled all the same
      .finally(() => this.#inFlight.delete(settling));
    this.#inFlight.add(settling);
  }

  /**
   * Settles a delivery. What fails outside the runner (a retry copy RabbitMQ did not confirm) is
   * tried again here after a wait, doubling up to 30 s, the message held all along: handing it back
   * would count toward the delivery limit as if its consumer had died, and end it, falsely, as
   * `stalled_too_often`. The inbox answers `duplicate` to what the failed try had committed. Once
   * the consumer closes, or its channel did, the message is left to RabbitMQ to hand out again.
   */
  async #settleHolding(channel: Channel, retries: ConfirmChannel, message: ConsumeMessage): Promise<void> {
    for (let waitMs = 1000; ; waitMs = Math.min(2 * waitMs, 30_000)) {
      const report = await this.#settle(channel, retries, message).catch((error: unknown) => void this.#onError(error));
      // Told once, after the acknowledgement, outside what is tried again: a delivery settled is never settled twice.
      if (report) return this.#onRecorded?.(report);
      await new Promise((resolve) => setTimeout(resolve, waitMs));
      if (this.#closing || this.#session?.channel !== channel) return;
    }
  }

  /** One delivery through the runner; acknowledged only after its commit, and after its retry was written. */
  async #settle(channel: Channel, retries: ConfirmChannel, message: ConsumeMessage): Promise<DeliveryReport> {
    const attempt = attemptOf(message, redeliveryExchangeOf(this.#settings.names, this.#consumer));
    const received: Received = {
      data: parse(message.content),
      brokerId: message.properties.messageId as string | undefined,
      attempt,
      lastAttempt: attempt >= this.#settings.policy.attempts,
    };
    const settlement = await this.#runner.process(received);
    // A dead letter that could not be stored (its last attempt) waits and comes back as it is.
    if (settlement.settle === 'retry') {
      await this.#retry(retries, message, attempt, received.lastAttempt ? 0 : 1);
      // Dying here leaves two copies, the delivery and its retry: the inbox settles the second.
      this.#faults.crashIf('crash-after-retry-copy', this.#consumer);
    }
    channel.ack(message);
    return settlement.report;
  }

  /**
   * Writes the message, its attempt counted on, to its retry exchange, routed to the queue where it
   * waits its backoff; from there RabbitMQ sends it on to the consumer's redelivery exchange.
   */
  async #retry(retries: ConfirmChannel, message: ConsumeMessage, attempt: number, counted: number): Promise<void> {
    const { names, policy } = this.#settings;
    const delayMs = backoffMs(policy, attempt);
    if (!this.#retryQueues.has(delayMs)) {
      await declareRetryQueue(retries, names, this.#consumer, delayMs);
      this.#retryQueues.add(delayMs);
    }
    const headers = { ...message.properties.headers, [ATTEMPT_HEADER]: attempt + counted };
    // Mandatory: a copy no retry queue took (one deleted meanwhile) comes back, and is tried again.
    const unrouted = await unroutedOf(retries, [String(message.properties.messageId)], (channel) =>
      channel.publish(retryExchangeOf(names, this.#consumer), String(delayMs), message.content, {
        ...message.properties,
        headers,
        mandatory: true,
      }),
    );
    if (unrouted.length > 0) {
      this.#retryQueues.delete(delayMs); // deleted meanwhile: declared again at the next try
      throw new Error(`${this.#consumer}: the retry queue of ${delayMs} ms took no copy`);
    }
  }

  /** What RabbitMQ stopped redelivering (its consumers kept dying), kept as a dead letter. */
  #bury(channel: Channel, message: ConsumeMessage): void {
    const data = parse(message.content);
    const brokerId = message.properties.messageId as string | undefined;
    const attempt = Number(message.properties.headers?.['x-delivery-count'] ?? this.#settings.deliveryLimit) + 1;
    const reason = `handed out ${attempt} times and never settled: its consumers kept dying`;
    // Held in flight, so close() waits for it; a dead letter not stored is handed back a second
    // later, on a channel still open (a closed one has handed it back already).
    const burying = this.#runner
      .deadLetter({ data, brokerId, attempt }, messageIdOf(data, brokerId), 'stalled_too_often', reason)
      .then(
        () => channel.ack(message),
        async (error: unknown) => {
          this.#onError(error);
          await new Promise((resolve) => setTimeout(resolve, 1000));
          if (this.#session?.channel === channel) channel.nack(message, false, true);
        },
      )
      .catch(this.#onError)
      .finally(() => this.#inFlight.delete(burying));
    this.#inFlight.add(burying);
  }
}

/**
 * Which attempt a delivery is. Only a message that came back through the consumer's own redelivery
 * exchange carries a count the consumer wrote: RabbitMQ names the exchange a delivery came through,
 * and only the consumer's user may write to that one (`rabbitmqPermissionsOf`). Anything else — a
 * contract's exchange, whatever its publisher put in the header — is a first attempt, so no
 * publisher can skip a consumer's retries or prolong them.
 */
function attemptOf(message: ConsumeMessage, redeliveryExchange: string): number {
  if (message.fields.exchange !== redeliveryExchange) return 1;
  const counted: unknown = message.properties.headers?.[ATTEMPT_HEADER];
  return typeof counted === 'number' && Number.isSafeInteger(counted) && counted >= 1 ? counted : 1;
}

/** A message's body as the runner reads it: its JSON, or the text itself when it is none. */
function parse(content: Buffer): unknown {
  const text = content.toString('utf8');
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** How long opening a connection may take before it fails and is tried again. */
const CONNECT_TIMEOUT_MS = 10_000;
/** How often a consumer looks for the exchanges of the subscriptions it could not bind. */
const SUBSCRIPTION_CHECK_MS = 1000;
