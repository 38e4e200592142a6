import { randomUUID } from 'node:crypto';
import { traceparentOf } from '@idem/contracts';
import { processed, stale, type MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/messaging';
import type { Tx } from '../db.js';
import { newChargeKey } from '../domain/payment-attempt.js';

/**
 * payments.stock-reserved.v1: create the order's payment attempt with a fresh provider
 * idempotency key, persisted here, in the inbox transaction. No provider call happens inside
 * a transaction; the payment worker makes it. The attempt is unique per order (the business
 * idempotency key), so a second reservation message for the order creates nothing.
 */
export function handleStockReserved({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, MessageOf<'payments.stock-reserved.v1'>> {
  return async (message, tx) => {
    const { orderId, payment } = message.body;
    const cancelled = await tx.orderCancellation.findUnique({ where: { orderId } });
    if (cancelled) return stale(`order ${orderId} was cancelled before its payment was due; nothing is charged`);
    const at = now();
    await tx.paymentAttempt.createMany({
      data: {
        id: randomUUID(),
        orderId,
        amountCents: payment.amountCents,
        currency: payment.currency,
        paymentMethod: payment.method,
        status: 'pending',
        idempotencyKey: newChargeKey(),
        idempotencyKeyCreatedAt: at,
        nextAttemptAt: at,
        correlationId: message.correlationId,
        causationId: message.messageId,
        traceparent: traceparentOf(),
        createdAt: at,
        updatedAt: at,
      },
      skipDuplicates: true, // ON CONFLICT DO NOTHING: the order already has its attempt
    });
    return processed;
  };
}
