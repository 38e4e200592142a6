import { processed, stale, type LocksFirst, type OneStatementHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/shop';
import type { Tx } from '../db.js';
import { commitReservation, commitWrite, reservationsStockFirst } from '../application/stock.js';

type PaymentCaptured = MessageOf<'inventory.payment-captured.v1'>;

/**
 * inventory.payment-captured.v1: the order is paid, so what its reservation held is sold (once);
 * when it still holds it, the commitment and the inbox's record are one statement.
 */
export function handlePaymentCaptured({
  now,
}: {
  now: () => Date;
}): OneStatementHandler<Tx, PaymentCaptured> & LocksFirst<Tx, PaymentCaptured> {
  return Object.assign(
    async (message: PaymentCaptured, tx: Tx) => {
      const { orderId } = message.body;
      if (await commitReservation(tx, orderId, now())) return processed;
      // Released first (a cancel overtook the payment; the refund follows), or committed already.
      return stale(`order ${orderId} holds no reserved stock any more; nothing to commit`);
    },
    {
      inOneStatement: (message: PaymentCaptured) => ({
        with: commitWrite(message.body.orderId, now()),
        wrote: 'committed',
      }),
      ...reservationsStockFirst,
    },
  );
}
