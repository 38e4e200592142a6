import type { MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/messaging';
import { emailAboutOrder } from '../application/work-items.js';
import type { Tx } from '../db.js';
import { receiptEmail } from '../domain/emails.js';

/** notifications.payment-captured.v1: queue the receipt, once per order. */
export function handlePaymentCaptured({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, MessageOf<'notifications.payment-captured.v1'>> {
  return (message, tx) =>
    emailAboutOrder(tx, message.body.orderId, 'receipt', (order) => receiptEmail(order, message.body), now());
}
