import { describe, expect, it } from 'vitest';
import { moveOf, nextStatus, onCapture, ORDER_STATUSES, ORDER_TRIGGERS } from './order-status.js';

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
    ['RESERVED', 'reservation-expired', 'CANCELLED'],
    ['PAID', 'reservation-expired', 'CANCELLED'],
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

  describe('a capture', () => {
    const order = { totalCents: 4999, currency: 'eur' } as const;
    const right = { amountCents: 4999, currency: 'eur' } as const;

    it('pays an order waiting for its payment when it is the total, in its currency', () => {
      expect(onCapture({ ...order, status: 'RESERVED' }, right)).toBe('pay');
      expect(onCapture({ ...order, status: 'PENDING' }, right)).toBe('pay');
    });

    it('is mischarged when the amount or the currency is not the order total', () => {
      expect(onCapture({ ...order, status: 'RESERVED' }, { ...right, amountCents: 4998 })).toBe('mischarged');
      expect(onCapture({ ...order, status: 'RESERVED' }, { ...right, currency: 'usd' })).toBe('mischarged');
    });

    it('is refunded for every order that can no longer be paid, whatever its amount', () => {
      const unpayable = ORDER_STATUSES.filter((status) => !['PENDING', 'RESERVED', 'PAID'].includes(status));
      expect(unpayable).toEqual(['REJECTED', 'PAYMENT_FAILED', 'CANCELLED', 'REFUNDED']);
      for (const status of unpayable) expect(onCapture({ ...order, status }, right)).toBe('not_payable');
    });

    it('changes nothing for an order already paid', () => {
      expect(onCapture({ ...order, status: 'PAID' }, right)).toBe('already_paid');
    });
  });

  it('moves on each trigger to one status, from exactly the statuses the machine allows it from', () => {
    for (const trigger of ORDER_TRIGGERS) {
      const { from, to } = moveOf(trigger);
      for (const status of ORDER_STATUSES)
        expect(nextStatus(status, trigger), `${trigger} from ${status}`).toBe(from.includes(status) ? to : undefined);
    }
  });
});
