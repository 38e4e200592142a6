import type { ConnectionOptions } from 'node:tls';
import {
  backoffMs,
  defaultDeliveryPolicy,
  subscriptionsOf,
  type DeliveryPolicy,
  type Transport,
} from '@idem/transport';
import { endpointOf, openConnection } from './connection.js';
import {
  bindSubscriptions,
  deadQueueOf,
  declareConsumer,
  exchangeOf,
  queueOf,
  redeliveryExchangeOf,
  retryExchangeOf,
  retryQueueOf,
  subscriptionOf,
} from './topology.js';
import { startRabbitConsumer } from './consumer.js';
import { createRabbitPublisher } from './publisher.js';
import { UnboundSubscriptionError } from './unbound-subscription-error.js';

/** RabbitMQ as a transport: where it is, and how every publisher and consumer of it retries. */
export interface RabbitmqOptions {
  /**
   * Where RabbitMQ is, as whom: `amqps://<user>:<password>@<host>:5671/<vhost>` (TLS), or amqp://
   * on a network you trust; each service its own user (`rabbitmqPermissionsOf`). There is no
   * default: without it the RABBITMQ_URL variable is read, and without that the transport refuses
   * to start (`RabbitmqConfigError`), as it does a URL that names no user.
   * @defaultValue the RABBITMQ_URL variable
   */
  readonly url?: string;
  /**
   * For an amqps:// URL: the options of Node's `tls.connect`, passed through as they are — `ca`
   * (RabbitMQ's certificate authority), `cert` and `key` (a client certificate), `servername`
   * (the name checked in RabbitMQ's certificate, and sent as SNI), `rejectUnauthorized`. Refused
   * with an amqp:// URL, which would ignore them. @defaultValue Node's: the system's CAs, the URL's host
   */
  readonly tls?: ConnectionOptions;
  /** The first part of every exchange and queue name, so systems can share a virtual host. @defaultValue 'idem' */
  readonly prefix?: string;
  /** @defaultValue defaultDeliveryPolicy; RabbitMQ keeps no delivered message, so its keepCompletedMs is moot */
  readonly policy?: DeliveryPolicy;
  /** Redeliveries after a consumer died holding a message before it is a dead letter. @defaultValue 5 */
  readonly deliveryLimit?: number;
  /**
   * The heartbeat asked of RabbitMQ, unless the URL asks one (`?heartbeat=`): a connection that
   * hears nothing for two of them is taken for dead and opened again, as behind a dead link nothing
   * else ends it (RabbitMQ proposes 60 s: two minutes). @defaultValue 10
   */
  readonly heartbeatSeconds?: number;
}

/**
 * The RabbitMQ transport: an exchange per contract, a quorum queue per consumer bound to the
 * contracts it subscribes to (subscriptions belong to consumers: topology.ts), publisher confirms,
 * retries through delay queues, dead letters into the inbox's table.
 */
export function rabbitmq(options: RabbitmqOptions = {}): Transport {
  const { endpoint, names, policy, deliveryLimit } = settingsOf(options);
  return {
    system: 'rabbitmq',
    policy,
    createPublisher: (publishing) => createRabbitPublisher(endpoint, names, publishing),
    /**
     * Declares the consumer's queues and binds them. A contract whose exchange no producer has
     * declared is declared here if the user may; if it may not, the rest is done and this rejects
     * (`UnboundSubscriptionError`): nothing of that contract would wait for the consumer.
     */
    async subscribe({ catalogue, consumer }) {
      const model = await openConnection(endpoint);
      try {
        const channel = await model.createChannel();
        channel.on('error', () => {}); // a refused declaration rejects below, and closes this channel only
        await declareConsumer(channel, names, consumer, deliveryLimit);
        const { unbound } = await bindSubscriptions(model, names, consumer, subscriptionsOf(catalogue, consumer));
        if (unbound[0] !== undefined) throw new UnboundSubscriptionError(consumer, unbound[0]);
      } finally {
        await model.close();
      }
    },
    startConsumer: (consuming) => startRabbitConsumer({ endpoint, names, policy, deliveryLimit }, consuming),
  };
}

/** The options with their defaults. */
const settingsOf = (options: RabbitmqOptions) => ({
  endpoint: endpointOf(options),
  names: { prefix: options.prefix ?? 'idem' },
  policy: options.policy ?? defaultDeliveryPolicy,
  deliveryLimit: options.deliveryLimit ?? 5,
});

/**
 * Deletes what the transport with these options declared for `consumers` — each one's queue, retry
 * queues and dead queue, with the messages in them, its exchanges, and its subscriptions to
 * `contracts` — and the exchanges of `contracts`: for a consumer retired for good, or a system torn
 * down (tests). Never for a consumer still deployed.
 */
export async function deleteTopology(
  options: RabbitmqOptions,
  { consumers, contracts = [] }: { readonly consumers: readonly string[]; readonly contracts?: readonly string[] },
): Promise<void> {
  const { endpoint, names, policy } = settingsOf(options);
  const delays = Array.from({ length: policy.attempts }, (_, i) => backoffMs(policy, i + 1));
  const model = await openConnection(endpoint);
  try {
    const channel = await model.createChannel();
    channel.on('error', () => {}); // a refused deletion rejects below
    for (const consumer of consumers) {
      const retryQueues = delays.map((delay) => retryQueueOf(names, consumer, delay));
      for (const queue of [queueOf(names, consumer), deadQueueOf(names, consumer), ...retryQueues])
        await channel.deleteQueue(queue);
      for (const exchange of [
        redeliveryExchangeOf(names, consumer),
        retryExchangeOf(names, consumer),
        deadQueueOf(names, consumer),
        ...contracts.map((contract) => subscriptionOf(names, consumer, contract)),
      ])
        await channel.deleteExchange(exchange);
    }
    for (const contract of contracts) await channel.deleteExchange(exchangeOf(names, contract));
  } finally {
    await model.close();
  }
}
