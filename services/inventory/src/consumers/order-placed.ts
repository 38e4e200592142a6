import { processed, stale, type LocksFirst, type OneStatementHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/shop';
import { reserveStock, reserveWrite } from '../application/reservations.js';
import { lockStock } from '../application/stock.js';
import type { SqlClient } from '@idem/database';
import type { Tx } from '../db.js';

type OrderPlaced = MessageOf<'inventory.order-placed.v1'>;

/**
 * inventory.order-placed.v1: reserve the order's stock (or reject it), in the inbox transaction;
 * when the stock covers it, the reservation, its event and the inbox's record are one statement.
 */
export function handleOrderPlaced({
  now,
}: {
  now: () => Date;
}): OneStatementHandler<Tx, OrderPlaced> & LocksFirst<Tx, OrderPlaced> {
  return Object.assign(
    async (message: OrderPlaced, tx: Tx) => {
      if ((await reserveStock(tx, message, message.body, now())) === 'stale')
        return stale(`order ${message.body.orderId} was cancelled before it was placed here; nothing is reserved`);
      return processed;
    },
    {
      inOneStatement: (message: OrderPlaced, db: SqlClient) => reserveWrite(db, message, message.body, now()),
      // A batch locks the stock of all its orders first, in SKU order (the one lock order, stock.ts).
      lockFirst: async (messages: readonly OrderPlaced[], tx: Tx) => {
        await lockStock(tx, [...new Set(messages.flatMap((message) => message.body.lines.map((line) => line.sku)))]);
      },
    },
  );
}
