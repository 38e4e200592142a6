import { processed, type MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/messaging';
import type { Tx } from '../db.js';
import { orderReceivedEmail } from '../domain/emails.js';
import { addEmailWorkItem } from '../application/work-items.js';

/** notifications.order-placed.v1: keep the order's summary and queue the "order received" email. */
export function handleOrderPlaced({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, MessageOf<'notifications.order-placed.v1'>> {
  return async (message, tx) => {
    const { orderId, customerEmail, currency, lines, totalCents } = message.body;
    const at = now();
    await tx.orderSummary.createMany({
      data: { orderId, customerEmail, currency, lines, totalCents, placedAt: new Date(message.occurredAt) },
      skipDuplicates: true,
    });
    await addEmailWorkItem(
      tx,
      {
        dedupeKey: `order-received:${orderId}`,
        kind: 'order-received',
        orderId,
        to: customerEmail,
        email: orderReceivedEmail(message.body),
      },
      at,
    );
    return processed;
  };
}
