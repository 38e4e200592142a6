import { enqueue } from '@idem/outbox';
import { shop } from '@idem/shop';
import type { PrismaClient, Tx } from '../db.js';
import { isCancelled } from '../domain/order-status.js';
import { HTTP_TRANSACTION } from './idempotency-keys.js';
import { applyTransition, findOrder, type OrderView, type Owner } from './orders.js';

export type CancelOrderResult =
  | { readonly kind: 'cancelled'; readonly order: OrderView }
  /** No such order of this caller. */
  | { readonly kind: 'unknown_order' }
  /** Past the point of cancelling (its status says where it is). */
  | { readonly kind: 'too_late'; readonly status: string };

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
): Promise<CancelOrderResult> {
  return db.$transaction(async (tx): Promise<CancelOrderResult> => {
    const at = now();
    const result = await applyTransition(tx, orderId, 'cancel', { now: at, causationId: null, reason, owner });
    if (result.kind === 'unknown_order') return { kind: 'unknown_order' };
    if (result.kind === 'not_applicable') {
      if (isCancelled(result.status)) return { kind: 'cancelled', order: (await findOrder(db, orderId, owner))! };
      return { kind: 'too_late', status: result.status };
    }
    await announceCancellation(tx, result.order, { reason, correlationId, causationId: null, at });
    return { kind: 'cancelled', order: result.order };
  }, HTTP_TRANSACTION);
}

/**
 * Says that the order is cancelled, with `orders.order-cancelled.v1` in the caller's transaction:
 * inventory gives its stock back, payments cancels its payment or refunds what was taken. Said
 * again for a capture that reaches an order that can no longer be paid: each consumer does only
 * what is still undone (a cancelled order keeps no money).
 */
export async function announceCancellation(
  tx: Tx,
  order: Pick<OrderView, 'orderId' | 'version'>,
  {
    reason,
    correlationId,
    causationId,
    at,
  }: { reason: string; correlationId: string; causationId: string | null; at: Date },
): Promise<void> {
  await enqueue(
    tx,
    shop,
    {
      type: 'orders.order-cancelled.v1',
      aggregateId: order.orderId,
      aggregateVersion: order.version,
      correlationId,
      causationId,
      body: { orderId: order.orderId, reason },
    },
    at,
  );
}
