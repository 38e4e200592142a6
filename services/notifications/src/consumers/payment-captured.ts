import { processed, transientFailure, type MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/shop';
import { emailAboutOrder } from '../application/work-items.js';
import type { Tx } from '../db.js';
import { receiptEmail } from '../domain/emails.js';

/** notifications.payment-captured.v1: queue the receipt, once per order. */
export function handlePaymentCaptured({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, MessageOf<'notifications.payment-captured.v1'>> {
  return async (message, tx) => {
    const { orderId } = message.body;
    const queued = await emailAboutOrder(tx, orderId, 'receipt', (order) => receiptEmail(order, message.body), now());
    if (queued === 'order_not_known_yet')
      return transientFailure(queued, `order ${orderId} has not been seen here yet`);
    return processed;
  };
}
