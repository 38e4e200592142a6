import type { EventType } from './events.js';
import type { Envelope } from './parse-envelope.js';

/**
 * Who consumes what. A consumer name is stable across deployments (it is half of the dedupe
 * key `(consumer, message_id)`: renaming one replays everything still retained), and it is
 * also the name of the consumer's BullMQ queue. It keeps the version it was named with when
 * it moves to a newer version of its contract.
 */
export const subscriptions = {
  'orders.order-placed.v1': ['inventory.order-placed.v1', 'notifications.order-placed.v1'],
  'orders.order-cancelled.v1': ['inventory.order-cancelled.v1', 'payments.order-cancelled.v1'],
  // Each consumer of v1 subscribes to v2 too, under its name: one dedupe key across both versions.
  'orders.order-cancelled.v2': ['inventory.order-cancelled.v1', 'payments.order-cancelled.v1'],
  'inventory.stock-reserved.v1': ['payments.stock-reserved.v1', 'orders.stock-reserved.v1'],
  'inventory.stock-rejected.v1': ['orders.stock-rejected.v1'],
  'inventory.reservation-expired.v1': ['orders.reservation-expired.v1'],
  'payments.payment-captured.v1': [
    'orders.payment-captured.v1',
    'notifications.payment-captured.v1',
    'inventory.payment-captured.v1',
  ],
  'payments.payment-failed.v1': ['orders.payment-failed.v1', 'inventory.payment-failed.v1'],
  'payments.payment-refunded.v1': ['orders.payment-refunded.v1', 'notifications.payment-refunded.v1'],
} as const satisfies Record<EventType, readonly string[]>;

export type ConsumerName = (typeof subscriptions)[EventType][number];

/**
 * The contract a consumer subscribes to: one, or — while a producer moves to a new version —
 * several versions of one (a union, so its handler reads each).
 */
export type ContractOf<C extends ConsumerName> = {
  [T in EventType]: C extends (typeof subscriptions)[T][number] ? T : never;
}[EventType];

/** The contract a consumer subscribes to, as a typed envelope: what its handler receives. */
export type MessageOf<C extends ConsumerName> = Envelope<ContractOf<C>>;

/** Every consumer with the contracts it subscribes to (versions of one contract). */
export const consumers = Object.entries(subscriptions).reduce<Record<string, EventType[]>>((all, [type, names]) => {
  for (const name of names) (all[name] ??= []).push(type as EventType);
  return all;
}, {}) as unknown as { readonly [C in ConsumerName]: readonly ContractOf<C>[] };

export function subscribersOf<T extends EventType>(type: T): (typeof subscriptions)[T] {
  return subscriptions[type];
}

export function isConsumerName(name: string): name is ConsumerName {
  return Object.hasOwn(consumers, name);
}

/** The service a contract or consumer name belongs to: the part before the first dot. */
export function serviceOf(name: string): string {
  return name.slice(0, name.indexOf('.'));
}

/**
 * The queues a service touches: those of its own consumers, and those it publishes to (every
 * subscriber of the events it produces). What its Redis user may reach (@idem/messaging's
 * `redisUserOf`), and nothing more.
 */
export function queuesOf(service: string): { consumes: ConsumerName[]; publishesTo: ConsumerName[] } {
  const names = Object.keys(consumers) as ConsumerName[];
  const publishesTo = new Set<ConsumerName>();
  for (const [type, subscribers] of Object.entries(subscriptions) as [EventType, readonly ConsumerName[]][]) {
    if (serviceOf(type) === service) subscribers.forEach((subscriber) => publishesTo.add(subscriber));
  }
  return { consumes: names.filter((name) => serviceOf(name) === service), publishesTo: [...publishesTo].sort() };
}
