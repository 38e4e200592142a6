import { transitionOn } from '../application/order-transitions.js';

/** orders.payment-failed.v1: the order's payment failed, with the provider's reason for its customer. */
export const handlePaymentFailed = ({ now }: { now: () => Date }) =>
  transitionOn<'orders.payment-failed.v1'>('payment-failed', { now, reasonOf: (message) => message.body.reason });
