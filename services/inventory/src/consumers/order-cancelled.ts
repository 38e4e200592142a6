import { processed, stale, type LocksFirst, type MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/shop';
import { cancelReservation } from '../application/reservations.js';
import type { Tx } from '../db.js';
import { reservationsStockFirst } from '../application/stock.js';

type OrderCancelled = MessageOf<'inventory.order-cancelled.v1'>;

/** inventory.order-cancelled.v1 (v1 and v2): the order's stock goes back, once. */
export function handleOrderCancelled({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, OrderCancelled> & LocksFirst<Tx, OrderCancelled> {
  const handler = async (message: OrderCancelled, tx: Tx) => {
    const { orderId } = message.body;
    if ((await cancelReservation(tx, message, orderId, now())) === 'stale')
      return stale(`order ${orderId} is already past version ${message.aggregateVersion}`);
    return processed;
  };
  return Object.assign(handler, reservationsStockFirst);
}
