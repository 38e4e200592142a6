import { processed, stale, type OneStatementHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/shop';
import { openAttempt, openWrite, type OrderToPay } from '../application/payment-attempts.js';
import type { Tx } from '../db.js';

type StockReserved = MessageOf<'payments.stock-reserved.v1'>;

const orderToPay = ({ body: { orderId, payment }, correlationId, messageId }: StockReserved): OrderToPay => ({
  orderId,
  payment,
  correlationId,
  causationId: messageId,
});

/**
 * payments.stock-reserved.v1: the order's stock is held, so its payment is due; when its attempt
 * is opened, that and the inbox's record are one statement.
 */
export function handleStockReserved({ now }: { now: () => Date }): OneStatementHandler<Tx, StockReserved> {
  return Object.assign(
    async (message: StockReserved, tx: Tx) => {
      if ((await openAttempt(tx, orderToPay(message), now())) === 'cancelled')
        return stale(`order ${message.body.orderId} was cancelled before its payment was due; nothing is charged`);
      return processed;
    },
    { inOneStatement: (message: StockReserved) => ({ with: openWrite(orderToPay(message), now()), wrote: 'opened' }) },
  );
}
