import { processed, stale, type MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/messaging';
import type { Tx } from '../db.js';
import { releaseReservation } from '../application/stock.js';
import { advanceOrderVersion } from '../application/order-versions.js';

/**
 * inventory.order-cancelled.v1: release the order's stock once. A cancel that arrives before
 * its order-placed still records the order's version, so the late order-placed is stale.
 */
export function handleOrderCancelled({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, MessageOf<'inventory.order-cancelled.v1'>> {
  return async (message, tx) => {
    const { orderId } = message.body;
    const at = now();
    if (!(await advanceOrderVersion(tx, message, at)))
      return stale(`order ${orderId} is already past version ${message.aggregateVersion}`);
    await releaseReservation(tx, orderId, at);
    return processed;
  };
}
