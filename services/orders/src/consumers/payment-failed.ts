import { transitionOn } from '../application/order-transitions.js';

/** orders.payment-failed.v1: moves the order on through its state machine (stale when it no longer applies). */
export const handlePaymentFailed = ({ now }: { now: () => Date }) =>
  transitionOn<'orders.payment-failed.v1'>('payment-failed', { now });
