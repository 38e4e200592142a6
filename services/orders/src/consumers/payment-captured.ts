import type { MessageOf } from '@idem/shop';
import { processed, stale, type OneStatementHandler } from '@idem/inbox';
import { captureInOneStatement, takeCapture } from '../application/captures.js';
import type { Tx } from '../db.js';

type PaymentCaptured = MessageOf<'orders.payment-captured.v1'>;

/**
 * orders.payment-captured.v1: the order is paid — when the capture is its total and it can still
 * be paid (then the move and the inbox's record are one statement); otherwise — not its total, an
 * order that can no longer be paid, or one never placed — the capture is refused and refunded
 * (application/captures.ts).
 */
export function handlePaymentCaptured({ now }: { now: () => Date }): OneStatementHandler<Tx, PaymentCaptured> {
  return Object.assign(
    async (message: PaymentCaptured, tx: Tx) => {
      const { orderId } = message.body;
      const result = await takeCapture(tx, message, now());
      switch (result.kind) {
        case 'paid':
        case 'refused':
          return processed;
        case 'already_paid':
          return stale(`order ${orderId} is paid already`);
      }
    },
    { inOneStatement: (message: PaymentCaptured) => captureInOneStatement(message, now()) },
  );
}
