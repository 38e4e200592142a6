/** The order state machine: which event moves an order from which status to which. Pure. */

export const ORDER_STATUSES = [
  'PENDING',
  'RESERVED',
  'REJECTED',
  'PAID',
  'PAYMENT_FAILED',
  'CANCELLED',
  'REFUNDED',
] as const;
export type OrderStatus = (typeof ORDER_STATUSES)[number];

export type OrderTrigger =
  'stock-reserved' | 'stock-rejected' | 'payment-captured' | 'payment-failed' | 'payment-refunded' | 'cancel';

/**
 * Events arrive on separate queues, so a payment event can overtake the stock-reserved that
 * preceded it (payments and orders both consume stock-reserved). A payment implies the stock
 * was reserved, so it also applies to a PENDING order; the late stock-reserved is then stale.
 */
const TRANSITIONS: Record<OrderTrigger, Partial<Record<OrderStatus, OrderStatus>>> = {
  'stock-reserved': { PENDING: 'RESERVED' },
  'stock-rejected': { PENDING: 'REJECTED' },
  'payment-captured': { PENDING: 'PAID', RESERVED: 'PAID' },
  'payment-failed': { PENDING: 'PAYMENT_FAILED', RESERVED: 'PAYMENT_FAILED' },
  'payment-refunded': { CANCELLED: 'REFUNDED' },
  cancel: { PENDING: 'CANCELLED', RESERVED: 'CANCELLED', PAID: 'CANCELLED' },
};

/** The status after `trigger`, or undefined when it no longer applies (a late or stale event). */
export function nextStatus(status: OrderStatus, trigger: OrderTrigger): OrderStatus | undefined {
  return TRANSITIONS[trigger][status];
}

/** An order that has been cancelled (and perhaps refunded) is cancelled; asking again changes nothing. */
export function isCancelled(status: OrderStatus): boolean {
  return status === 'CANCELLED' || status === 'REFUNDED';
}
