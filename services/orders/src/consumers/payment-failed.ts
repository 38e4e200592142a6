import type { MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/shop';
import { moveOrderOn, outcomeOfMove } from '../application/order-transitions.js';
import type { Tx } from '../db.js';

/** orders.payment-failed.v1: the order's payment failed, with the provider's reason for its customer. */
export function handlePaymentFailed({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, MessageOf<'orders.payment-failed.v1'>> {
  return async (message, tx) => {
    const moved = await moveOrderOn(tx, 'payment-failed', message, { at: now(), reason: message.body.reason });
    return outcomeOfMove(moved, message.body.orderId, 'payment-failed');
  };
}
