import { HttpError } from '@idem/http';
import { enqueue } from '@idem/outbox';
import type { PrismaClient } from '../db.js';
import { isCancelled } from '../domain/order-status.js';
import { HTTP_TRANSACTION } from './idempotency-keys.js';
import { applyTransition, findOrder, type OrderView, type Owner } from './orders.js';

/**
 * Cancels an order the caller owns, and says so with `orders.order-cancelled.v1` in the same
 * transaction (a paid order is then refunded by payments). Cancelling again answers the
 * cancelled order; an order past the point of cancelling is a conflict.
 */
export async function cancelOrder(
  db: PrismaClient,
  {
    orderId,
    reason,
    owner,
    correlationId,
    now,
  }: { orderId: string; reason: string; owner: Owner; correlationId: string; now: () => Date },
): Promise<OrderView> {
  return db.$transaction(async (tx): Promise<OrderView> => {
    const at = now();
    const result = await applyTransition(tx, orderId, 'cancel', { now: at, causationId: null, owner });
    if (result.kind === 'unknown_order') throw new HttpError('not_found', `no order ${orderId}`);
    if (result.kind === 'not_applicable') {
      if (isCancelled(result.status)) return (await findOrder(db, orderId, owner))!;
      throw new HttpError('conflict', `order ${orderId} is ${result.status} and can no longer be cancelled`);
    }
    await enqueue(
      tx,
      {
        type: 'orders.order-cancelled.v1',
        aggregateId: orderId,
        aggregateVersion: result.order.version,
        correlationId,
        causationId: null,
        body: { orderId, reason },
      },
      at,
    );
    return result.order;
  }, HTTP_TRANSACTION);
}
