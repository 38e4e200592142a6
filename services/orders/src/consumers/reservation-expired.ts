import type { MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/shop';
import { announceCancellation } from '../application/cancel-order.js';
import { moveOrderOn, outcomeOfMove } from '../application/order-transitions.js';
import type { Tx } from '../db.js';

const REASON =
  'The payment did not complete in time, so the stock held for the order went back: the order is cancelled.';

/**
 * orders.reservation-expired.v1: inventory gave the order's stock back because its payment did not
 * complete in time. The order is cancelled, and says so: payments cancels the payment, or refunds
 * one that completed meanwhile.
 */
export function handleReservationExpired({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, MessageOf<'orders.reservation-expired.v1'>> {
  return async (message, tx) => {
    const at = now();
    const moved = await moveOrderOn(tx, 'reservation-expired', message, { at, reason: REASON });
    if (moved.kind === 'changed') {
      const { correlationId, messageId: causationId } = message;
      await announceCancellation(tx, moved.order, { reason: REASON, correlationId, causationId, at });
    }
    return outcomeOfMove(moved, message.body.orderId, 'reservation-expired');
  };
}
