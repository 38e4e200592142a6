import type { EventBody, EventType } from './catalogue.js';

const orderId = '0b7c6a52-3f0e-4b53-9d0c-6f1a2e9d4c11';

/**
 * A valid body of every contract, for documentation and tests (`testMessage` in @idem/testkit
 * wraps one in an envelope). A new contract without an example does not compile.
 */
export const exampleBodies: { readonly [T in EventType]: EventBody<T> } = {
  'orders.order-placed.v1': {
    orderId,
    customerEmail: 'ada@example.com',
    currency: 'eur',
    paymentMethod: 'pm_card_visa',
    lines: [{ sku: 'keyboard', quantity: 1, unitPriceCents: 4999 }],
    totalCents: 4999,
  },
  'orders.order-cancelled.v1': { orderId, reason: 'changed my mind' },
  'orders.order-cancelled.v2': { orderId, reason: { by: 'customer', text: 'changed my mind' } },
  'inventory.stock-reserved.v1': {
    orderId,
    lines: [{ sku: 'keyboard', quantity: 1 }],
    payment: { amountCents: 4999, currency: 'eur', method: 'pm_card_visa' },
  },
  'inventory.stock-rejected.v1': { orderId, shortages: [{ sku: 'sold-out', requested: 1, available: 0 }] },
  'inventory.reservation-expired.v1': {
    orderId,
    lines: [{ sku: 'keyboard', quantity: 1 }],
    reservedAt: '2026-12-02T10:00:00.000Z',
  },
  'payments.payment-captured.v1': { orderId, paymentIntentId: 'pi_123', amountCents: 4999, currency: 'eur' },
  'payments.payment-failed.v1': { orderId, code: 'card_declined', reason: 'Your card was declined.' },
  'payments.payment-refunded.v1': { orderId, refundId: 're_123', amountCents: 4999, currency: 'eur' },
};
