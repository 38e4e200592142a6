import type { MessageOf } from '@idem/shop';
import { permanentFailure, processed, stale, type MessageHandler } from '@idem/inbox';
import { takeCapture } from '../application/captures.js';
import type { Tx } from '../db.js';

/**
 * orders.payment-captured.v1: the order is paid — when the capture is its total and it can still
 * be paid; otherwise the capture is refused and refunded (application/captures.ts).
 */
export function handlePaymentCaptured({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, MessageOf<'orders.payment-captured.v1'>> {
  return async (message, tx) => {
    const { orderId } = message.body;
    const result = await takeCapture(tx, message, now());
    switch (result.kind) {
      case 'paid':
      case 'refused':
        return processed;
      case 'already_paid':
        return stale(`order ${orderId} is paid already`);
      case 'unknown_order':
        return permanentFailure('unknown_order', `no order ${orderId} in the orders database`);
    }
  };
}
