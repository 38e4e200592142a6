import { processed, type MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/shop';
import { cancelPayment } from '../application/payment-attempts.js';
import type { Tx } from '../db.js';

/** payments.order-cancelled.v1 (v1 and v2): the order's payment is cancelled, or refunded if it was taken. */
export function handleOrderCancelled({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, MessageOf<'payments.order-cancelled.v1'>> {
  return async (message, tx) => {
    await cancelPayment(tx, message.body.orderId, message.messageId, now());
    return processed;
  };
}
