import { processed, transientFailure, type HandlerResult, type MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/messaging';
import type { Tx } from '../db.js';
import { receiptEmail, refundEmail, type Email, type OrderSummary } from '../domain/emails.js';
import { addEmailWorkItem } from '../work-items.js';

/**
 * Emails about a payment need the order's lines, which arrive with orders.order-placed.v1 on
 * another queue. If that has not been processed yet, the delivery is retried later.
 */
async function emailAboutOrder(
  tx: Tx,
  orderId: string,
  kind: 'receipt' | 'refund',
  write: (order: OrderSummary) => Email,
  now: Date,
): Promise<HandlerResult> {
  const summary = await tx.orderSummary.findUnique({ where: { orderId } });
  if (!summary) return transientFailure('order_not_known_yet', `order ${orderId} has not been seen here yet`);
  const order = { ...summary, lines: summary.lines as unknown as OrderSummary['lines'] };
  await addEmailWorkItem(
    tx,
    { dedupeKey: `${kind}:${orderId}`, kind, orderId, to: summary.customerEmail, email: write(order) },
    now,
  );
  return processed;
}

/** notifications.payment-captured.v1: queue the receipt, once per order. */
export function handlePaymentCaptured({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, MessageOf<'notifications.payment-captured.v1'>> {
  return (message, tx) =>
    emailAboutOrder(tx, message.body.orderId, 'receipt', (order) => receiptEmail(order, message.body), now());
}

/** notifications.payment-refunded.v1: queue the refund notice, once per order. */
export function handlePaymentRefunded({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, MessageOf<'notifications.payment-refunded.v1'>> {
  return (message, tx) =>
    emailAboutOrder(tx, message.body.orderId, 'refund', (order) => refundEmail(order, message.body), now());
}
