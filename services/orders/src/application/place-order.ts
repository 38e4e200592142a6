import { enqueue } from '@idem/outbox';
import type { PrismaClient, Tx } from '../db.js';
import { HTTP_TRANSACTION, idempotent, type StoredResponse } from './idempotency-keys.js';
import { createOrder, type NewOrder } from './orders.js';

/**
 * Places an order: the PENDING order and its `orders.order-placed.v1` event commit together
 * (transactional outbox). With an Idempotency-Key, a repeat replays the first answer instead.
 */
export async function placeOrder(
  db: PrismaClient,
  {
    order,
    correlationId,
    idempotencyKey,
    now,
    keyRetentionMs,
  }: {
    order: NewOrder;
    correlationId: string;
    idempotencyKey: string | undefined;
    now: () => Date;
    keyRetentionMs: number;
  },
): Promise<StoredResponse & { replayed: boolean }> {
  const place = async (tx: Tx) => {
    const at = now();
    const created = await createOrder(tx, order, at);
    await enqueue(
      tx,
      {
        type: 'orders.order-placed.v1',
        aggregateId: created.orderId,
        aggregateVersion: created.version,
        correlationId,
        causationId: null,
        body: {
          orderId: created.orderId,
          customerEmail: created.customerEmail,
          currency: created.currency,
          paymentMethod: created.paymentMethod,
          lines: created.lines,
          totalCents: created.totalCents,
        },
      },
      at,
    );
    return { status: 201, body: created };
  };
  if (idempotencyKey === undefined) return { ...(await db.$transaction(place, HTTP_TRANSACTION)), replayed: false };
  return idempotent(
    db,
    {
      customerId: order.customerId,
      key: idempotencyKey,
      request: { method: 'POST', path: '/orders', body: order },
      now: now(),
      retentionMs: keyRetentionMs,
    },
    place,
  );
}
