import { z } from 'zod';

const orderId = z.uuid();
const sku = z.string().min(1).max(64);
const currency = z.string().regex(/^[a-z]{3}$/, 'expected a lowercase ISO 4217 code such as "eur"');
const cents = z.number().int().nonnegative();

const orderLine = z.object({
  sku,
  quantity: z.number().int().positive(),
  unitPriceCents: cents,
});

export const orderPlacedV1 = z.object({
  orderId,
  customerEmail: z.email(),
  currency,
  paymentMethod: z.string().min(1).max(100),
  lines: z.array(orderLine).min(1).max(100),
  totalCents: cents,
});

export const orderCancelledV1 = z.object({
  orderId,
  reason: z.string().max(500),
});

export const stockReservedV1 = z.object({
  orderId,
  lines: z.array(z.object({ sku, quantity: z.number().int().positive() })).min(1),
  /** What payments needs to charge, carried through so it never reads the orders database. */
  payment: z.object({ amountCents: cents, currency, method: z.string().min(1).max(100) }),
});

export const stockRejectedV1 = z.object({
  orderId,
  shortages: z.array(z.object({ sku, requested: z.number().int().positive(), available: z.number().int() })).min(1),
});

export const paymentCapturedV1 = z.object({
  orderId,
  paymentIntentId: z.string().min(1),
  amountCents: cents,
  currency,
});

export const paymentFailedV1 = z.object({
  orderId,
  code: z.string().min(1).max(100),
  reason: z.string().max(500),
});

export const paymentRefundedV1 = z.object({
  orderId,
  refundId: z.string().min(1),
  amountCents: cents,
  currency,
});

/** Every integration event, by its versioned contract name. */
export const events = {
  'orders.order-placed.v1': orderPlacedV1,
  'orders.order-cancelled.v1': orderCancelledV1,
  'inventory.stock-reserved.v1': stockReservedV1,
  'inventory.stock-rejected.v1': stockRejectedV1,
  'payments.payment-captured.v1': paymentCapturedV1,
  'payments.payment-failed.v1': paymentFailedV1,
  'payments.payment-refunded.v1': paymentRefundedV1,
} as const;

export type EventType = keyof typeof events;
export type EventBody<T extends EventType> = z.infer<(typeof events)[T]>;

export function isEventType(type: string): type is EventType {
  return Object.hasOwn(events, type);
}
