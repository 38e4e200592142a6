import type { SqlClient } from '@idem/database';
import { processed, transientFailure, type OneStatementHandler } from '@idem/inbox';
import type { AnyEnvelope } from '@idem/contracts';
import { emailAboutOrder, emailAboutOrderWrite } from '../application/work-items.js';
import type { Tx } from '../db.js';
import type { Email, OrderSummary } from '../domain/emails.js';

/**
 * A message about an order's payment: queue its email (`kind`), once per order; when the order is
 * known, the email and the inbox's record are one statement. Until the order's summary has
 * arrived (orders.order-placed.v1, on another queue) the delivery is retried.
 */
export function emailAboutOrderHandler<M extends AnyEnvelope & { body: { orderId: string } }>(
  kind: string,
  write: (order: OrderSummary, message: M) => Email,
  { now }: { now: () => Date },
): OneStatementHandler<Tx, M> {
  return Object.assign(
    async (message: M, tx: Tx) => {
      const { orderId } = message.body;
      const queued = await emailAboutOrder(tx, orderId, kind, (order) => write(order, message), now());
      if (queued === 'order_not_known_yet')
        return transientFailure(queued, `order ${orderId} has not been seen here yet`);
      return processed;
    },
    {
      inOneStatement: (message: M, db: SqlClient) =>
        emailAboutOrderWrite(db, message.body.orderId, kind, (order) => write(order, message), now()),
    },
  );
}
