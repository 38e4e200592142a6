import {
  deadQueueOf,
  exchangeOf,
  queueOf,
  redeliveryExchangeOf,
  retryExchangeOf,
  subscriptionOf,
  type Names,
} from './topology.js';

/** What a service declares, as `reachOf(catalogue, service)` of @idem/contracts names it. */
export interface Reach {
  /** Its consumers: their queues, and the exchanges and queues of their retries and dead letters. */
  readonly consumes: readonly string[];
  /** The contracts it publishes: their exchanges. */
  readonly publishes: readonly string[];
  /** Its consumers' subscriptions, each a contract and a consumer: the contracts' exchanges, which its queues are bound to. */
  readonly subscribes: readonly { readonly contract: string; readonly consumer: string }[];
}

/**
 * A RabbitMQ user's permissions on its virtual host, as `rabbitmqctl set_permissions -p <vhost>
 * <user> <configure> <write> <read>` takes them: each a regular expression, anchored, over the
 * names of exchanges and queues alike.
 */
export interface RabbitmqPermissions {
  readonly configure: string;
  readonly write: string;
  readonly read: string;
}

/**
 * The permissions of a service's own RabbitMQ user: what the transport does for what the service
 * declares, and nothing more. What each AMQP operation needs (RabbitMQ's access control guide):
 *
 * - declaring or deleting an exchange or a queue needs `configure` on it, and a queue that
 *   dead-letters also `write` on that exchange and `read` on itself: a consumer's queues and its
 *   own exchanges, its subscriptions' exchanges, and the exchanges of the contracts it publishes
 *   (looking whether one exists, a passive declaration, needs no right: a producer looks for the
 *   subscriptions of its contracts' consumers);
 * - binding a queue to an exchange needs `write` on the queue and `read` on the exchange: its queues
 *   to the contracts it subscribes to, and to its own exchanges;
 * - publishing needs `write` on the exchange: the contracts it publishes, and its consumers' retry
 *   and redelivery exchanges (retries, replays);
 * - consuming, and purging, need `read` on the queue: its own.
 *
 * So a service cannot publish another's contract, read, purge, delete or bind another's queue,
 * delete another's exchange, nor write to any consumer's retry or redelivery exchange but its own
 * (the attempt counts a consumer reads come from there), nor to the default exchange, which routes
 * to any queue by name. It can bind its own queues to the contracts it subscribes to, so it reads
 * those, and cannot declare their exchanges: a consumer started before its producer binds once
 * the producer declared (`UnboundSubscriptionError` till then).
 */
export function rabbitmqPermissionsOf(reach: Reach, names: Names = { prefix: 'idem' }): RabbitmqPermissions {
  const subscribed = reach.subscribes.map(({ contract }) => contract);
  for (const consumer of reach.consumes)
    if (reach.publishes.includes(consumer) || subscribed.includes(consumer))
      throw new Error(
        `${consumer} names a consumer and a contract: its queue and the contract's exchange would share a name`,
      );
  const owned = reach.consumes.flatMap((consumer) => [
    literal(queueOf(names, consumer)),
    literal(redeliveryExchangeOf(names, consumer)),
    literal(retryExchangeOf(names, consumer)),
    `${literal(retryExchangeOf(names, consumer))}\\.[0-9]+`, // its retry queues, one per delay
    literal(deadQueueOf(names, consumer)),
  ]);
  const exchanges = (contracts: readonly string[]) => contracts.map((contract) => literal(exchangeOf(names, contract)));
  const subscriptions = reach.subscribes.map(({ consumer, contract }) =>
    literal(subscriptionOf(names, consumer, contract)),
  );
  return {
    configure: anyOf([...owned, ...subscriptions, ...exchanges(reach.publishes)]),
    write: anyOf([...owned, ...exchanges(reach.publishes)]),
    read: anyOf([...owned, ...exchanges(subscribed)]),
  };
}

/** One alternation matching exactly these names, or nothing ('^$' matches no exchange or queue). */
const anyOf = (patterns: readonly string[]) =>
  patterns.length === 0 ? '^$' : `^(${[...new Set(patterns)].sort().join('|')})$`;

/** A name as a regular expression that matches it alone. */
const literal = (name: string) => name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
