import { transitionOn } from '../application/order-transitions.js';

/** orders.payment-refunded.v1: moves the order on through its state machine (stale when it no longer applies). */
export const handlePaymentRefunded = ({ now }: { now: () => Date }) =>
  transitionOn<'orders.payment-refunded.v1'>('payment-refunded', { now });
