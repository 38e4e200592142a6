import { describe, expect, it } from 'vitest';
import { afterCharge, onCancel, retryDelayMs } from './payment-attempt.js';

describe('the payment attempt state machine', () => {
  it('a successful charge captures, or refunds an attempt cancelled while it ran', () => {
    expect(afterCharge('succeeded', { cancelRequested: false })).toBe('captured');
    expect(afterCharge('succeeded', { cancelRequested: true })).toBe('refund_pending');
    expect(afterCharge('declined', { cancelRequested: true })).toBe('failed');
  });

  it('a cancellation cancels what was never charged, refunds what was, and waits for a call under way', () => {
    expect(onCancel({ status: 'pending', providerCalls: 0 })).toBe('cancelled');
    expect(onCancel({ status: 'parked', providerCalls: 3 })).toBe('cancelled');
    expect(onCancel({ status: 'pending', providerCalls: 1 })).toBe('mark');
    expect(onCancel({ status: 'captured', providerCalls: 1 })).toBe('refund_pending');
    for (const status of ['failed', 'refund_pending', 'refunded', 'cancelled'])
      expect(onCancel({ status, providerCalls: 1 })).toBeUndefined();
  });

  it('retries back off, doubling, up to five minutes', () => {
    expect([0, 1, 2, 3].map((calls) => retryDelayMs(calls, 1000))).toEqual([1000, 1000, 2000, 4000]);
    expect(retryDelayMs(30, 1000)).toBe(300_000);
  });
});
