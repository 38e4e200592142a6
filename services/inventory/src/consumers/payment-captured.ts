import { processed, stale, type MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/shop';
import type { Tx } from '../db.js';
import { commitReservation } from '../application/stock.js';

/** inventory.payment-captured.v1: the order is paid, so what its reservation held is sold (once). */
export function handlePaymentCaptured({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, MessageOf<'inventory.payment-captured.v1'>> {
  return async (message, tx) => {
    const { orderId } = message.body;
    if (await commitReservation(tx, orderId, now())) return processed;
    // Released first (a cancel overtook the payment; the refund follows), or committed already.
    return stale(`order ${orderId} holds no reserved stock any more; nothing to commit`);
  };
}
