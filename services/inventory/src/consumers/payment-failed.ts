import { processed, type MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/shop';
import type { Tx } from '../db.js';
import { releaseReservation } from '../application/stock.js';

/** inventory.payment-failed.v1: the order will not be paid, so its stock goes back (once). */
export function handlePaymentFailed({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, MessageOf<'inventory.payment-failed.v1'>> {
  return async (message, tx) => {
    await releaseReservation(tx, message.body.orderId, now());
    return processed;
  };
}
