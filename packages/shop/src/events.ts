import { z } from 'zod';

/** The largest value an `int4` column holds: every amount and count must fit its column. */
export const INT4_MAX = 2_147_483_647;

const orderId = z.uuid();
/** Letters, digits, dot, dash, underscore: nothing an email that echoes it could be abused with. */
export const skuSchema = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9._-]+$/, 'letters, digits, ".", "-" and "_" only');
const sku = skuSchema;
/**
 * The currencies the shop sells in (lowercase ISO 4217, as Stripe takes them): orders' catalog
 * prices in these. An event's currency is any such code — a consumer reads what it is sent.
 */
export const CURRENCIES = ['eur', 'usd', 'gbp', 'chf', 'sek', 'nok', 'dkk', 'pln', 'cad', 'aud'] as const;
const currency = z.string().regex(/^[a-z]{3}$/, 'expected a lowercase ISO 4217 code such as "eur"');
const cents = z.number().int().nonnegative().max(INT4_MAX);
const quantity = z.number().int().positive().max(1_000_000);
const providerId = z.string().min(1).max(255);

const orderLine = z.object({
  sku,
  quantity,
  unitPriceCents: cents,
});

export const orderPlacedV1 = z.object({
  orderId,
  customerEmail: z.email().max(254),
  currency,
  paymentMethod: z.string().min(1).max(100),
  lines: z.array(orderLine).min(1).max(100),
  totalCents: cents,
});

export const orderCancelledV1 = z.object({
  orderId,
  reason: z.string().max(500),
});

/**
 * v2 breaks v1: the reason says who cancelled, so it is an object where v1 had free text (a v1
 * reader would refuse it). Consumers accept both, ready for orders to move over
 * (docs/extending.md, "A new version of a contract").
 */
export const orderCancelledV2 = z.object({
  orderId,
  reason: z.object({ by: z.enum(['customer', 'operator']), text: z.string().max(500) }),
});

export const stockReservedV1 = z.object({
  orderId,
  lines: z.array(z.object({ sku, quantity })).min(1).max(100),
  /** What payments needs to charge, carried through so it never reads the orders database. */
  payment: z.object({ amountCents: cents, currency, method: z.string().min(1).max(100) }),
});

export const stockRejectedV1 = z.object({
  orderId,
  shortages: z
    .array(z.object({ sku, requested: quantity, available: z.number().int().min(-INT4_MAX).max(INT4_MAX) }))
    .min(1)
    .max(100),
});

/**
 * Inventory gave a reservation's stock back because its payment did not complete in time
 * (RESERVATION_TTL_MS): the order cannot be fulfilled as placed.
 */
export const reservationExpiredV1 = z.object({
  orderId,
  lines: z.array(z.object({ sku, quantity })).min(1).max(100),
  reservedAt: z.iso.datetime(),
});

export const paymentCapturedV1 = z.object({
  orderId,
  paymentIntentId: providerId,
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
  refundId: providerId,
  amountCents: cents,
  currency,
});
