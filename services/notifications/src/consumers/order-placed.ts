import { processed, type MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/shop';
import { acceptOrder } from '../application/work-items.js';
import type { Tx } from '../db.js';

/** notifications.order-placed.v1: keep the order's summary and queue the "order received" email. */
export function handleOrderPlaced({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, MessageOf<'notifications.order-placed.v1'>> {
  return async (message, tx) => {
    await acceptOrder(tx, { ...message.body, placedAt: new Date(message.occurredAt) }, now());
    return processed;
  };
}
