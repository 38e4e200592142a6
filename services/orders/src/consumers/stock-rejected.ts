import type { MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/shop';
import { moveOrderOn, outcomeOfMove } from '../application/order-transitions.js';
import type { Tx } from '../db.js';

/** orders.stock-rejected.v1: moves the order on through its state machine (stale when it no longer applies). */
export function handleStockRejected({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, MessageOf<'orders.stock-rejected.v1'>> {
  return async (message, tx) =>
    outcomeOfMove(
      await moveOrderOn(tx, 'stock-rejected', message, { at: now() }),
      message.body.orderId,
      'stock-rejected',
    );
}
