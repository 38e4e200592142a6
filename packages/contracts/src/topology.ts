import type { EventType } from './events.js';

/**
 * Who consumes what. A consumer name is stable across deployments (it is half of the dedupe
 * key `(consumer, message_id)`: renaming one replays everything still retained), and it is
 * also the name of the consumer's BullMQ queue.
 */
export const subscriptions = {
  'orders.order-placed.v1': ['inventory.order-placed.v1', 'notifications.order-placed.v1'],
  'orders.order-cancelled.v1': ['inventory.order-cancelled.v1', 'payments.order-cancelled.v1'],
  'inventory.stock-reserved.v1': ['payments.stock-reserved.v1', 'orders.stock-reserved.v1'],
  'inventory.stock-rejected.v1': ['orders.stock-rejected.v1'],
  'payments.payment-captured.v1': [
    'orders.payment-captured.v1',
    'notifications.payment-captured.v1',
    'inventory.payment-captured.v1',
  ],
  'payments.payment-failed.v1': ['orders.payment-failed.v1', 'inventory.payment-failed.v1'],
  'payments.payment-refunded.v1': ['orders.payment-refunded.v1', 'notifications.payment-refunded.v1'],
} as const satisfies Record<EventType, readonly string[]>;

export type ConsumerName = (typeof subscriptions)[EventType][number];

/** The one contract a consumer subscribes to. */
export type ContractOf<C extends ConsumerName> = {
  [T in EventType]: C extends (typeof subscriptions)[T][number] ? T : never;
}[EventType];

/** Every consumer with the one contract it subscribes to. */
export const consumers = Object.fromEntries(
  Object.entries(subscriptions).flatMap(([type, names]) => names.map((name) => [name, type])),
) as { readonly [C in ConsumerName]: ContractOf<C> };

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
