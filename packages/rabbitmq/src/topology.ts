import type { Channel, ChannelModel } from 'amqplib';

/**
 * The names and shapes of what the transport declares on RabbitMQ. Subscriptions belong to the
 * consumers: a producer publishes to one exchange per contract and knows nobody; a consumer
 * declares its own queue and binds it to the exchanges of the contracts it subscribes to, so a
 * consumer added later receives what is published from then on, and no producer is redeployed.
 *
 *     <prefix>.<contract>                  fanout exchange: where a producer publishes
 *     <prefix>.<consumer>                  quorum queue, bound to each subscribed exchange and to its redelivery exchange
 *     <prefix>.<consumer>.redelivery       fanout exchange: retries back from their wait, and replays
 *     <prefix>.<consumer>.retry            direct exchange: a retry copy, routed by its delay in ms
 *     <prefix>.<consumer>.retry.<ms>       quorum queue: a retry waits <ms>, then goes to the redelivery exchange
 *     <prefix>.<consumer>.dead             fanout exchange and quorum queue: what RabbitMQ stopped redelivering
 *     <prefix>.<consumer>.subscription.<contract>
 *                                          fanout exchange, unused: declared once the queue is bound to the contract
 *
 * A fanout exchange keeps nothing for a queue not bound yet. So a producer publishes a contract only
 * once each consumer its catalogue names has subscribed to it (`subscribed`: that consumer's
 * subscription exchange exists), and publishes it `mandatory`: a message no queue took comes back,
 * and the publication fails — the outbox keeps the event until it can be delivered.
 *
 * Everything a consumer writes goes through exchanges named after it (never the default
 * exchange, which routes to any queue by name), so its RabbitMQ user can be the only one allowed
 * to write them (`rabbitmqPermissionsOf`), and what arrives through its redelivery exchange
 * carries an attempt count only it wrote.
 */
export interface Names {
  readonly prefix: string;
}

/** The exchange a contract is published to. */
export const exchangeOf = ({ prefix }: Names, contract: string) => `${prefix}.${contract}`;
/** A consumer's own queue. */
export const queueOf = ({ prefix }: Names, consumer: string) => `${prefix}.${consumer}`;
/** The exchange only a consumer writes: its retries come back through it, and replays are sent to it. */
export const redeliveryExchangeOf = (names: Names, consumer: string) => `${queueOf(names, consumer)}.redelivery`;
/** The exchange a consumer writes its retry copies to, each routed by its delay. */
export const retryExchangeOf = (names: Names, consumer: string) => `${queueOf(names, consumer)}.retry`;
/** Where a consumer's retries wait `delayMs` before they go back to its queue. */
export const retryQueueOf = (names: Names, consumer: string, delayMs: number) =>
  `${retryExchangeOf(names, consumer)}.${delayMs}`;
/** Where RabbitMQ moves what it stopped redelivering to a consumer (its consumers kept dying): an exchange and its queue. */
export const deadQueueOf = (names: Names, consumer: string) => `${queueOf(names, consumer)}.dead`;

/**
 * The exchange that says a consumer has subscribed to a contract: declared by the consumer once its
 * queue is bound to the contract's exchange, looked for by producers (a passive declaration, which
 * needs no right). Nothing is published to it.
 */
export const subscriptionOf = (names: Names, consumer: string, contract: string) =>
  `${queueOf(names, consumer)}.subscription.${contract}`;

/** Declares a contract's exchange (idempotent: the same arguments each time). */
export const declareExchange = (channel: Channel, names: Names, contract: string) =>
  channel.assertExchange(exchangeOf(names, contract), 'fanout', { durable: true });

/**
 * Declares a consumer's quorum queue, its dead and retry exchanges and queues, and its redelivery
 * exchange. A delivery whose consumer died holding it is handed out again, and counted
 * (`x-delivery-count`); past `deliveryLimit` redeliveries RabbitMQ moves it to the dead queue,
 * which the consumer stores as a dead letter. The bindings to the contracts are `bindSubscriptions`'.
 */
export async function declareConsumer(
  channel: Channel,
  names: Names,
  consumer: string,
  deliveryLimit: number,
): Promise<void> {
  const queue = queueOf(names, consumer);
  const dead = deadQueueOf(names, consumer);
  const redelivery = redeliveryExchangeOf(names, consumer);
  await channel.assertExchange(dead, 'fanout', { durable: true });
  await channel.assertQueue(dead, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
  await channel.bindQueue(dead, dead, '');
  await channel.assertExchange(redelivery, 'fanout', { durable: true });
  await channel.assertExchange(retryExchangeOf(names, consumer), 'direct', { durable: true });
  await channel.assertQueue(queue, {
    durable: true,
    arguments: { ...DEAD_LETTERED_AT_LEAST_ONCE, 'x-delivery-limit': deliveryLimit, 'x-dead-letter-exchange': dead },
  });
  await channel.bindQueue(queue, redelivery, '');
}

/**
 * A quorum queue whose dead letters RabbitMQ keeps until the queue they go to confirmed them
 * (at-least-once dead lettering, RabbitMQ 3.10 on), which holds only while publishers are refused
 * rather than the oldest messages dropped: a message dead-lettered while that queue is unavailable,
 * deleted or not bound yet waits in its queue and is sent again, never lost.
 */
const DEAD_LETTERED_AT_LEAST_ONCE = {
  'x-queue-type': 'quorum',
  'x-dead-letter-strategy': 'at-least-once',
  'x-overflow': 'reject-publish',
} as const;

/**
 * Binds a consumer's queue to the exchange of each contract it subscribes to, declares its
 * subscription to each (`subscriptionOf`) once bound, and says which of
 * those no producer had declared yet (`missing`). A missing exchange is declared when the
 * consumer's user may (then it receives from now on); under a user of its own it may not
 * (`rabbitmqPermissionsOf`: configure only what it owns), and the contract is left `unbound` until
 * its producer declares it. Each contract on a channel of its own: a refusal closes its channel.
 * `declare: false` only looks (a consumer looking again for what it could not declare: a refused
 * declaration is logged by RabbitMQ each time).
 */
export async function bindSubscriptions(
  model: ChannelModel,
  names: Names,
  consumer: string,
  contracts: readonly string[],
  { declare = true }: { readonly declare?: boolean } = {},
): Promise<{ missing: string[]; unbound: string[] }> {
  const missing: string[] = [];
  const unbound: string[] = [];
  for (const contract of contracts) {
    const exchange = exchangeOf(names, contract);
    const exists = await onChannel(model, (channel) => channel.checkExchange(exchange));
    if (!exists) {
      missing.push(contract);
      if (!declare || !(await onChannel(model, (channel) => declareExchange(channel, names, contract)))) {
        unbound.push(contract);
        continue;
      }
    }
    // Refused only to a user without read on the exchange: a consumer the permissions do not name.
    const channel = await model.createChannel();
    channel.on('error', () => {}); // the rejection below says it
    await channel.bindQueue(queueOf(names, consumer), exchange, '');
    await channel.assertExchange(subscriptionOf(names, consumer, contract), 'fanout', { durable: true });
    await channel.close();
  }
  return { missing, unbound };
}

/** Whether `consumer` has subscribed to `contract`: its queue bound, its subscription exchange declared. */
export const subscribed = (model: ChannelModel, names: Names, consumer: string, contract: string) =>
  onChannel(model, (channel) => channel.checkExchange(subscriptionOf(names, consumer, contract)));

/** Whether `step` succeeded on a channel of its own (a 404 or 403 closes that channel only). */
async function onChannel(model: ChannelModel, step: (channel: Channel) => Promise<unknown>): Promise<boolean> {
  const channel = await model.createChannel();
  channel.on('error', () => {});
  const done = await step(channel).then(
    () => true,
    () => false,
  );
  if (done) await channel.close();
  return done;
}

/** Declares the queue where a retry waits `delayMs` before it goes back, and routes its delay there. */
export async function declareRetryQueue(channel: Channel, names: Names, consumer: string, delayMs: number) {
  const queue = retryQueueOf(names, consumer, delayMs);
  await channel.assertQueue(queue, {
    durable: true,
    arguments: {
      ...DEAD_LETTERED_AT_LEAST_ONCE,
      'x-message-ttl': delayMs,
      'x-dead-letter-exchange': redeliveryExchangeOf(names, consumer),
    },
  });
  await channel.bindQueue(queue, retryExchangeOf(names, consumer), String(delayMs));
}
