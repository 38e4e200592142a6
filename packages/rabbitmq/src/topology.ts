import type { Channel } from 'amqplib';

/**
 * The names and shapes of what the transport declares on RabbitMQ. Subscriptions belong to the
 * consumers: a producer publishes to one exchange per contract and knows nobody; a consumer
 * declares its own queue and binds it to the exchanges of the contracts it subscribes to, so a
 * consumer added later receives what is published from then on, and no producer is redeployed.
 *
 *     <prefix>.<contract>            fanout exchange, durable: where a producer publishes
 *     <prefix>.<consumer>            quorum queue, durable, bound to each subscribed exchange
 *     <prefix>.<consumer>.retry.<ms> a message waits here <ms>, then goes back to the queue
 *     <prefix>.<consumer>.dead       what RabbitMQ stopped redelivering (handed out more than the limit)
 */
export interface Names {
  readonly prefix: string;
}

/** The exchange a contract is published to. */
export const exchangeOf = ({ prefix }: Names, contract: string) => `${prefix}.${contract}`;
/** A consumer's own queue. */
export const queueOf = ({ prefix }: Names, consumer: string) => `${prefix}.${consumer}`;
/** Where a consumer's retries wait `delayMs` before they go back to its queue. */
export const retryQueueOf = (names: Names, consumer: string, delayMs: number) =>
  `${queueOf(names, consumer)}.retry.${delayMs}`;
/** Where RabbitMQ moves what it stopped redelivering to a consumer (its consumers kept dying). */
export const deadQueueOf = (names: Names, consumer: string) => `${queueOf(names, consumer)}.dead`;

/** Declares a contract's exchange (idempotent: the same arguments each time). */
export const declareExchange = (channel: Channel, names: Names, contract: string) =>
  channel.assertExchange(exchangeOf(names, contract), 'fanout', { durable: true });

/**
 * Declares a consumer's quorum queue, its dead queue, and its bindings. A delivery whose consumer
 * died holding it is handed out again, and counted (`x-delivery-count`); past `deliveryLimit`
 * redeliveries RabbitMQ moves it to the dead queue, which the consumer stores as a dead letter.
 */
export async function declareConsumer(
  channel: Channel,
  names: Names,
  consumer: string,
  contracts: readonly string[],
  deliveryLimit: number,
): Promise<void> {
  const queue = queueOf(names, consumer);
  await channel.assertQueue(deadQueueOf(names, consumer), { durable: true });
  await channel.assertQueue(queue, {
    durable: true,
    arguments: {
      'x-queue-type': 'quorum',
      'x-delivery-limit': deliveryLimit,
      'x-dead-letter-exchange': '',
      'x-dead-letter-routing-key': deadQueueOf(names, consumer),
    },
  });
  for (const contract of contracts) {
    await declareExchange(channel, names, contract);
    await channel.bindQueue(queue, exchangeOf(names, contract), '');
  }
}

/** Declares the queue where a retry waits `delayMs` before it goes back to its consumer's queue. */
export const declareRetryQueue = (channel: Channel, names: Names, consumer: string, delayMs: number) =>
  channel.assertQueue(retryQueueOf(names, consumer, delayMs), {
    durable: true,
    arguments: {
      'x-message-ttl': delayMs,
      'x-dead-letter-exchange': '',
      'x-dead-letter-routing-key': queueOf(names, consumer),
    },
  });
