import { processed, type OneStatementHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/shop';
import { acceptOrder, acceptOrderWrite } from '../application/work-items.js';
import type { SqlClient } from '@idem/database';
import type { Tx } from '../db.js';

type OrderPlaced = MessageOf<'notifications.order-placed.v1'>;

const placedOrder = ({ body, occurredAt }: OrderPlaced) => ({ ...body, placedAt: new Date(occurredAt) });

/**
 * notifications.order-placed.v1: keep the order's summary and queue the "order received" email;
 * the first time, both and the inbox's record are one statement.
 */
export function handleOrderPlaced({ now }: { now: () => Date }): OneStatementHandler<Tx, OrderPlaced> {
  return Object.assign(
    async (message: OrderPlaced, tx: Tx) => {
      await acceptOrder(tx, placedOrder(message), now());
      return processed;
    },
    { inOneStatement: (message: OrderPlaced, db: SqlClient) => acceptOrderWrite(db, placedOrder(message), now()) },
  );
}
