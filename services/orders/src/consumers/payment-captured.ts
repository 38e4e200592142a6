import { transitionOn } from '../application/order-transitions.js';

/** orders.payment-captured.v1: moves the order on through its state machine (stale when it no longer applies). */
export const handlePaymentCaptured = ({ now }: { now: () => Date }) =>
  transitionOn<'orders.payment-captured.v1'>('payment-captured', { now });
