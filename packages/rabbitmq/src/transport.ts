import {
  backoffMs,
  defaultDeliveryPolicy,
  subscriptionsOf,
  type DeliveryPolicy,
  type Transport,
} from '@idem/transport';
import { connect } from 'amqplib';
import { deadQueueOf, declareConsumer, exchangeOf, queueOf, retryQueueOf } from './topology.js';
import { startRabbitConsumer } from './consumer.js';
import { createRabbitPublisher } from './publisher.js';

/** RabbitMQ as a transport: where it is, and how every publisher and consumer of it retries. */
export interface RabbitmqOptions {
  /** @defaultValue the RABBITMQ_URL variable, else amqp://guest:guest@127.0.0.1:5672 */
  readonly url?: string;
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
  const { url, names, policy, deliveryLimit } = settingsOf(options);
  return {
    system: 'rabbitmq',
    policy,
    createPublisher: (publishing) => createRabbitPublisher(url, names, publishing),
    async subscribe({ catalogue, consumer }) {
      const model = await connect(url);
      try {
        await declareConsumer(
          await model.createChannel(),
          names,
          consumer,
          subscriptionsOf(catalogue, consumer),
          deliveryLimit,
        );
      } finally {
        await model.close();
      }
    },
    startConsumer: (consuming) => startRabbitConsumer({ url, names, policy, deliveryLimit }, consuming),
  };
}

/** The options with their defaults. */
const settingsOf = (options: RabbitmqOptions) => ({
  url: withHeartbeat(
    options.url ?? process.env.RABBITMQ_URL ?? 'amqp://guest:guest@127.0.0.1:5672',
    options.heartbeatSeconds ?? 10,
  ),
  names: { prefix: options.prefix ?? 'idem' },
  policy: options.policy ?? defaultDeliveryPolicy,
  deliveryLimit: options.deliveryLimit ?? 5,
});

/** `url` asking for a heartbeat of `seconds`, unless it asks for one already. */
function withHeartbeat(url: string, seconds: number): string {
  const parsed = new URL(url);
  if (!parsed.searchParams.has('heartbeat')) parsed.searchParams.set('heartbeat', String(seconds));
  return parsed.toString();
}

/**
 * Deletes what the transport with these options declared for `consumers` — each one's queue, retry
 * queues and dead queue, with the messages in them — and the exchanges of `contracts`: for a
 * consumer retired for good, or a system torn down (tests). Never for a consumer still deployed.
 */
export async function deleteTopology(
  options: RabbitmqOptions,
  { consumers, contracts = [] }: { readonly consumers: readonly string[]; readonly contracts?: readonly string[] },
): Promise<void> {
  const { url, names, policy } = settingsOf(options);
  const delays = Array.from({ length: policy.attempts }, (_, i) => backoffMs(policy, i + 1));
  const model = await connect(url);
  try {
    const channel = await model.createChannel();
    for (const consumer of consumers) {
      const retryQueues = delays.map((delay) => retryQueueOf(names, consumer, delay));
      for (const queue of [queueOf(names, consumer), deadQueueOf(names, consumer), ...retryQueues])
        await channel.deleteQueue(queue);
    }
    for (const contract of contracts) await channel.deleteExchange(exchangeOf(names, contract));
  } finally {
    await model.close();
  }
}
