import { processed, stale, type MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/shop';
import { cancelReservation } from '../application/reservations.js';
import type { Tx } from '../db.js';

/** inventory.order-cancelled.v1 (v1 and v2): the order's stock goes back, once. */
export function handleOrderCancelled({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, MessageOf<'inventory.order-cancelled.v1'>> {
  return async (message, tx) => {
    const { orderId } = message.body;
    if ((await cancelReservation(tx, message, orderId, now())) === 'stale')
      return stale(`order ${orderId} is already past version ${message.aggregateVersion}`);
    return processed;
  };
}
