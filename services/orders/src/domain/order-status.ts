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

/** What moves an order: the events about it, and a cancel request. */
export const ORDER_TRIGGERS = [
  'stock-reserved',
  'stock-rejected',
  'payment-captured',
  'payment-failed',
  'payment-refunded',
  'cancel',
  /** Inventory gave the order's stock back: its payment did not complete in time. */
  'reservation-expired',
] as const;
export type OrderTrigger = (typeof ORDER_TRIGGERS)[number];

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
  // A paid order whose stock went back (the capture overtook the expiry) cannot be fulfilled: it is
  // cancelled and refunded like any other.
  'reservation-expired': { PENDING: 'CANCELLED', RESERVED: 'CANCELLED', PAID: 'CANCELLED' },
};

/**
 * Where `trigger` moves an order, and from which statuses: every trigger has one target, whatever
 * the status it leaves (what lets one conditional write apply it: application/orders.ts).
 */
export function moveOf(trigger: OrderTrigger): { readonly from: OrderStatus[]; readonly to: OrderStatus } {
  const moves = TRANSITIONS[trigger];
  return { from: Object.keys(moves) as OrderStatus[], to: Object.values(moves)[0]! };
}

/** The status after `trigger`, or undefined when it no longer applies (a late or stale event). */
export function nextStatus(status: OrderStatus, trigger: OrderTrigger): OrderStatus | undefined {
  return TRANSITIONS[trigger][status];
}

/** An order that has been cancelled (and perhaps refunded) is cancelled; asking again changes nothing. */
export function isCancelled(status: OrderStatus): boolean {
  return status === 'CANCELLED' || status === 'REFUNDED';
}

/**
 * What a capture of `amountCents` in `currency` does to an order:
 * - `pay`: the order is waiting for its payment and this is its total;
 * - `mischarged`: the order is waiting for its payment and this is not its total — it is
 *   cancelled, and the capture refunded;
 * - `not_payable`: the order can no longer be paid (cancelled, refunded, failed, rejected) — the
 *   capture is refunded (a cancelled order keeps no money);
 * - `already_paid`: the order's payment is in (this capture, under another message) — nothing.
 */
export function onCapture(
  order: { status: OrderStatus; totalCents: number; currency: string },
  capture: { amountCents: number; currency: string },
): 'pay' | 'mischarged' | 'not_payable' | 'already_paid' {
  if (order.status === 'PAID') return 'already_paid';
  if (nextStatus(order.status, 'payment-captured') === undefined) return 'not_payable';
  const right = capture.amountCents === order.totalCents && capture.currency === order.currency;
  return right ? 'pay' : 'mischarged';
}
