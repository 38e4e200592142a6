import { processed, stale, type MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/shop';
import { reserveStock } from '../application/reservations.js';
import type { Tx } from '../db.js';

/** inventory.order-placed.v1: reserve the order's stock (or reject it), in the inbox transaction. */
export function handleOrderPlaced({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, MessageOf<'inventory.order-placed.v1'>> {
  return async (message, tx) => {
    if ((await reserveStock(tx, message, message.body, now())) === 'stale')
      return stale(`order ${message.body.orderId} was cancelled before it was placed here; nothing is reserved`);
    return processed;
  };
}
