import { traceparentOf } from '@idem/contracts';
import { processed, type MessageHandler } from '@idem/inbox';
import type { MessageOf } from '@idem/messaging';
import type { Tx } from '../db.js';
import { newRefundKey, onCancel } from '../domain/payment-attempt.js';

/**
 * payments.order-cancelled.v1: a payment that never reached the provider (or that it refused
 * as an invalid request) is cancelled; a
 * captured one gets a refund (with its own persisted key) that the worker performs; one whose
 * outcome at the provider is not known yet is marked, and the worker decides once it knows.
 */
export function handleOrderCancelled({
  now,
}: {
  now: () => Date;
}): MessageHandler<Tx, MessageOf<'payments.order-cancelled.v1'>> {
  return async (message, tx) => {
    const { orderId } = message.body;
    const at = now();
    await tx.orderCancellation.createMany({
      data: { orderId, messageId: message.messageId, cancelledAt: at },
      skipDuplicates: true,
    });
    const [attempt] = await tx.$queryRaw<{ id: string; status: string; provider_calls: number }[]>`
      SELECT id, status, provider_calls FROM payment_attempts WHERE order_id = ${orderId}::uuid FOR UPDATE`;
    if (!attempt) return processed; // the cancellation above stops a later stock-reserved

    const cancel = { cancelRequestedAt: at, cancelCausationId: message.messageId, updatedAt: at };
    const next = onCancel({ status: attempt.status, providerCalls: attempt.provider_calls });
    if (next === 'cancelled') {
      await tx.paymentAttempt.update({ where: { id: attempt.id }, data: { ...cancel, status: 'cancelled' } });
    } else if (next === 'mark') {
      // The provider may already have charged: the worker finishes the call with the same key
      // and refunds if it did.
      await tx.paymentAttempt.update({ where: { id: attempt.id }, data: cancel });
    } else if (next === 'refund_pending') {
      await tx.paymentAttempt.update({
        where: { id: attempt.id },
        data: {
          ...cancel,
          status: next,
          refundIdempotencyKey: newRefundKey(),
          nextAttemptAt: at,
          traceparent: traceparentOf(),
        },
      });
    }
    return processed;
  };
}
