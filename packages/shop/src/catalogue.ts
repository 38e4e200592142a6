import {
  createEnvelope as createAnyEnvelope,
  defineCatalogue,
  isConsumerName as isAnyConsumerName,
  isEventType as isAnyEventType,
  reachOf as reachOfAny,
  subscribersOf as subscribersOfAny,
  type ConsumerName as AnyConsumerName,
  type ContractOf as AnyContractOf,
  type Envelope as AnyShopEnvelope,
  type EventBody as AnyEventBody,
  type EventDraft as AnyEventDraft,
  type EventType as AnyEventType,
  type MessageOf as AnyMessageOf,
} from '@idem/contracts';
import {
  orderCancelledV1,
  orderCancelledV2,
  orderPlacedV1,
  paymentCapturedV1,
  paymentFailedV1,
  paymentRefundedV1,
  reservationExpiredV1,
  stockRejectedV1,
  stockReservedV1,
} from './events.js';

/**
 * The shop's catalogue: every integration event of the four services, who produces it, its body's
 * schema (zod), and who consumes it. A consumer name is stable across deployments (it is half of
 * the dedupe key `(consumer, message_id)`: renaming one replays everything still retained), and
 * it is also the name of the consumer's BullMQ queue. It keeps the version it was named with when
 * it moves to a newer version of its contract. The generic packages take this as any user's
 * catalogue (`defineCatalogue` in @idem/contracts): they name none of these events.
 */
export const shop = defineCatalogue({
  'orders.order-placed.v1': {
    producer: 'orders',
    body: orderPlacedV1,
    consumers: ['inventory.order-placed.v1', 'notifications.order-placed.v1'],
  },
  'orders.order-cancelled.v1': {
    producer: 'orders',
    body: orderCancelledV1,
    consumers: ['inventory.order-cancelled.v1', 'payments.order-cancelled.v1'],
  },
  // Each consumer of v1 subscribes to v2 too, under its name: one dedupe key across both versions.
  'orders.order-cancelled.v2': {
    producer: 'orders',
    body: orderCancelledV2,
    consumers: ['inventory.order-cancelled.v1', 'payments.order-cancelled.v1'],
  },
  'inventory.stock-reserved.v1': {
    producer: 'inventory',
    body: stockReservedV1,
    consumers: ['payments.stock-reserved.v1', 'orders.stock-reserved.v1'],
  },
  'inventory.stock-rejected.v1': {
    producer: 'inventory',
    body: stockRejectedV1,
    consumers: ['orders.stock-rejected.v1'],
  },
  'inventory.reservation-expired.v1': {
    producer: 'inventory',
    body: reservationExpiredV1,
    consumers: ['orders.reservation-expired.v1'],
  },
  'payments.payment-captured.v1': {
    producer: 'payments',
    body: paymentCapturedV1,
    consumers: ['orders.payment-captured.v1', 'notifications.payment-captured.v1', 'inventory.payment-captured.v1'],
  },
  'payments.payment-failed.v1': {
    producer: 'payments',
    body: paymentFailedV1,
    consumers: ['orders.payment-failed.v1', 'inventory.payment-failed.v1'],
  },
  'payments.payment-refunded.v1': {
    producer: 'payments',
    body: paymentRefundedV1,
    consumers: ['orders.payment-refunded.v1', 'notifications.payment-refunded.v1'],
  },
});

/** The shop's contracts, as the generic types take them. */
export type Shop = typeof shop.contracts;
/** The shop's event types. */
export type EventType = AnyEventType<Shop>;
export type EventBody<T extends EventType> = AnyEventBody<Shop, T>;
/** A validated envelope of the shop's contract `T`. */
export type Envelope<T extends EventType = EventType> = AnyShopEnvelope<Shop, T>;
export type EventDraft<T extends EventType = EventType> = AnyEventDraft<Shop, T>;
/** The shop's consumer names. */
export type ConsumerName = AnyConsumerName<Shop>;
export type ContractOf<C extends ConsumerName> = AnyContractOf<Shop, C>;
/** What a shop consumer's handler receives. */
export type MessageOf<C extends ConsumerName> = AnyMessageOf<Shop, C>;

/** Every event type of the shop, and who consumes each: the topology the services, the checker and the manifests follow. */
export const subscriptions = Object.fromEntries(
  Object.entries(shop.contracts).map(([type, contract]) => [type, contract.consumers]),
) as { readonly [T in EventType]: Shop[T]['consumers'] };

/** Every shop consumer with the contracts it subscribes to. */
export const consumers = shop.consumers;

export const subscribersOf = <T extends EventType>(type: T) => subscribersOfAny(shop, type);

/** What a shop service reaches at the broker (its Redis user's keys). */
export const reachOf = (service: string) => reachOfAny(shop, service);

/** A shop event's envelope (its id, producer and time given), for tests and tools. */
export const createEnvelope = <T extends EventType>(draft: EventDraft<T>, now: Date) =>
  createAnyEnvelope(shop, draft, now);

export const isEventType = (type: string): type is EventType => isAnyEventType(shop, type);
export const isConsumerName = (name: string): name is ConsumerName => isAnyConsumerName(shop, name);
