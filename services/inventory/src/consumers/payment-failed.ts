import { processed, type LocksFirst, type MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/shop';
import type { Tx } from '../db.js';

type PaymentFailed = MessageOf<'inventory.payment-failed.v1'>;
import { releaseReservation, reservationsStockFirst } from '../application/stock.js';

/** inventory.payment-failed.v1: the order will not be paid, so its stock goes back (once). */
export function handlePaymentFailed({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, PaymentFailed> & LocksFirst<Tx, PaymentFailed> {
  const handler = async (message: PaymentFailed, tx: Tx) => {
    await releaseReservation(tx, message.body.orderId, now());
    return processed;
  };
  return Object.assign(handler, reservationsStockFirst);
}
