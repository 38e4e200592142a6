import { processed, transientFailure, type MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/shop';
import { emailAboutOrder } from '../application/work-items.js';
import type { Tx } from '../db.js';
import { refundEmail } from '../domain/emails.js';

/** notifications.payment-refunded.v1: queue the refund notice, once per order. */
export function handlePaymentRefunded({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, MessageOf<'notifications.payment-refunded.v1'>> {
  return async (message, tx) => {
    const { orderId } = message.body;
    const queued = await emailAboutOrder(tx, orderId, 'refund', (order) => refundEmail(order, message.body), now());
    if (queued === 'order_not_known_yet')
      return transientFailure(queued, `order ${orderId} has not been seen here yet`);
    return processed;
  };
}
