import type { MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/shop';
import { moveOrderOn, outcomeOfMove } from '../application/order-transitions.js';
import type { Tx } from '../db.js';

/** orders.stock-reserved.v1: moves the order on through its state machine (stale when it no longer applies). */
export function handleStockReserved({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, MessageOf<'orders.stock-reserved.v1'>> {
  return async (message, tx) =>
    outcomeOfMove(
      await moveOrderOn(tx, 'stock-reserved', message, { at: now() }),
      message.body.orderId,
      'stock-reserved',
    );
}
