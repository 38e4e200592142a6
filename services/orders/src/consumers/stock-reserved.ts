import type { OneStatementHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/shop';
import { moveOrderOn, moveOrderOnInOneStatement, outcomeOfMove } from '../application/order-transitions.js';
import type { Tx } from '../db.js';

type StockReserved = MessageOf<'orders.stock-reserved.v1'>;

/**
 * orders.stock-reserved.v1: moves the order on through its state machine (stale when it no longer
 * applies); when it does apply, the move and the inbox's record are one statement.
 */
export function handleStockReserved({ now }: { now: () => Date }): OneStatementHandler<Tx, StockReserved> {
  return Object.assign(
    async (message: StockReserved, tx: Tx) =>
      outcomeOfMove(
        await moveOrderOn(tx, 'stock-reserved', message, { at: now() }),
        message.body.orderId,
        'stock-reserved',
      ),
    { inOneStatement: (message: StockReserved) => moveOrderOnInOneStatement('stock-reserved', message, { at: now() }) },
  );
}
