import { processed, stale, type MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/shop';
import { openAttempt } from '../application/payment-attempts.js';
import type { Tx } from '../db.js';

/** payments.stock-reserved.v1: the order's stock is held, so its payment is due. */
export function handleStockReserved({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, MessageOf<'payments.stock-reserved.v1'>> {
  return async (message, tx) => {
    const { orderId, payment } = message.body;
    const { correlationId, messageId: causationId } = message;
    if ((await openAttempt(tx, { orderId, payment, correlationId, causationId }, now())) === 'cancelled')
      return stale(`order ${orderId} was cancelled before its payment was due; nothing is charged`);
    return processed;
  };
}
