import { describe, expect, it } from 'vitest';
import { nextStatus } from './order-status.js';

describe('order status machine', () => {
  it.each([
    ['PENDING', 'stock-reserved', 'RESERVED'],
    ['PENDING', 'stock-rejected', 'REJECTED'],
    ['RESERVED', 'payment-captured', 'PAID'],
    ['PENDING', 'payment-captured', 'PAID'],
    ['PENDING', 'payment-failed', 'PAYMENT_FAILED'],
    ['RESERVED', 'payment-failed', 'PAYMENT_FAILED'],
    ['PENDING', 'cancel', 'CANCELLED'],
    ['RESERVED', 'cancel', 'CANCELLED'],
    ['PAID', 'cancel', 'CANCELLED'],
    ['CANCELLED', 'payment-refunded', 'REFUNDED'],
  ] as const)('moves %s on %s to %s', (from, trigger, to) => {
    expect(nextStatus(from, trigger)).toBe(to);
  });

  it.each([
    ['CANCELLED', 'stock-reserved'],
    ['CANCELLED', 'payment-captured'],
    ['PAID', 'stock-reserved'],
    ['REJECTED', 'cancel'],
    ['PAYMENT_FAILED', 'payment-captured'],
  ] as const)('treats %s + %s as no longer applicable', (from, trigger) => {
    expect(nextStatus(from, trigger)).toBeUndefined();
  });
});
