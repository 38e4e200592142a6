import type { MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/messaging';
import { emailAboutOrder } from '../application/work-items.js';
import type { Tx } from '../db.js';
import { refundEmail } from '../domain/emails.js';

/** notifications.payment-refunded.v1: queue the refund notice, once per order. */
export function handlePaymentRefunded({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, MessageOf<'notifications.payment-refunded.v1'>> {
  return (message, tx) =>
    emailAboutOrder(tx, message.body.orderId, 'refund', (order) => refundEmail(order, message.body), now());
}
