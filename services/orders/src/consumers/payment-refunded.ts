import type { MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/shop';
import { moveOrderOn, outcomeOfMove } from '../application/order-transitions.js';
import type { Tx } from '../db.js';

/** orders.payment-refunded.v1: moves the order on through its state machine (stale when it no longer applies). */
export function handlePaymentRefunded({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, MessageOf<'orders.payment-refunded.v1'>> {
  return async (message, tx) =>
    outcomeOfMove(
      await moveOrderOn(tx, 'payment-refunded', message, { at: now() }),
      message.body.orderId,
      'payment-refunded',
    );
}
