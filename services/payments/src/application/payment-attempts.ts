import { randomUUID } from 'node:crypto';
import { traceparentOf } from '@idem/contracts';
import { query, sql, type Sql } from '@idem/database';
import type { PrismaClient, Tx } from '../db.js';
import { newChargeKey, newRefundKey, onCancel } from '../domain/payment-attempt.js';

/** The channel the payment worker LISTENs on: an attempt became due (a charge or a refund). */
export const ATTEMPTS_CHANNEL = 'idem_payment_attempts';

/** The order whose payment {@link openAttempt} opens, as its stock-reserved message says it. */
export interface OrderToPay {
  readonly orderId: string;
  readonly payment: { amountCents: number; currency: string; method: string };
  readonly correlationId: string;
  readonly causationId: string;
}

/**
 * Opens the order's payment attempt with a fresh provider idempotency key, persisted here, in the
 * inbox transaction; no provider call happens inside a transaction (the payment worker makes it).
 * The attempt is unique per order (the business key), so a second reservation of the order opens
 * nothing; an order cancelled first is `cancelled` and nothing is charged. One statement
 * ({@link openWrite}).
 */
export async function openAttempt(tx: Tx, order: OrderToPay, at: Date): Promise<'opened' | 'cancelled'> {
  const [known] = await query<{ cancelled: boolean }>(
    tx,
    sql`WITH ${openWrite(order, at)} SELECT known.cancelled_at IS NOT NULL AS cancelled FROM known`,
  );
  return known?.cancelled ? 'cancelled' : 'opened';
}

/**
 * {@link openAttempt}'s write as the WITH list of a statement. First the order's row, written
 * (locked) as the cancellation writes it: a cancellation under way makes this wait for its commit
 * and then read its tombstone; one that comes later waits for this commit and then finds the
 * attempt. Then the attempt (`opened` has a row when it was written), unless the order is
 * cancelled or has one (the business key), with the payment worker's wake-up, delivered at the
 * commit. The stock-reserved consumer gives it to the inbox to run with its record as one
 * statement; when nothing is opened, the order's row was there already and is left as it was.
 */
export function openWrite(order: OrderToPay, at: Date): Sql {
  const { orderId, payment } = order;
  return sql`
    known AS (
      INSERT INTO payment_orders (order_id, created_at) VALUES (${orderId}::uuid, ${at})
      ON CONFLICT (order_id) DO UPDATE SET cancelled_at = payment_orders.cancelled_at
      RETURNING cancelled_at
    ), opened AS (
      INSERT INTO payment_attempts (id, order_id, amount_cents, currency, payment_method, status, idempotency_key,
                                    idempotency_key_created_at, next_attempt_at, correlation_id, causation_id,
                                    traceparent, created_at, updated_at)
      SELECT ${randomUUID()}::uuid, ${orderId}::uuid, ${payment.amountCents}, ${payment.currency}, ${payment.method},
             'pending', ${newChargeKey()}, ${at}, ${at}, ${order.correlationId}::uuid, ${order.causationId}::uuid,
             ${traceparentOf() ?? null}, ${at}, ${at}
      FROM known WHERE known.cancelled_at IS NULL
      ON CONFLICT DO NOTHING
      RETURNING pg_notify(${ATTEMPTS_CHANNEL}, '')
    )`;
}

/**
 * Cancels the order's payment: a payment that never reached the provider (or that it refused as an
 * invalid request) is cancelled; a captured one gets a refund (with its own persisted key) that the
 * worker performs; one whose outcome at the provider is not known yet is marked, and the worker
 * decides once it knows. The cancellation is kept as a tombstone on the order's row, so a later
 * stock-reserved for the order opens no attempt.
 */
export async function cancelPayment(tx: Tx, orderId: string, causationId: string, at: Date): Promise<void> {
  // The order's row first, as the opening writes it: an opening under way makes this wait for its
  // commit. Only then the attempt, in a statement of its own: a new statement reads what the
  // opening committed while this one waited (one statement would read from before the wait).
  await tx.$executeRaw`
    INSERT INTO payment_orders (order_id, cancelled_at, cancel_message_id, created_at)
    VALUES (${orderId}::uuid, ${at}, ${causationId}::uuid, ${at})
    ON CONFLICT (order_id) DO UPDATE
      SET cancelled_at = coalesce(payment_orders.cancelled_at, EXCLUDED.cancelled_at),
          cancel_message_id = coalesce(payment_orders.cancel_message_id, EXCLUDED.cancel_message_id)`;
  const [attempt] = await tx.$queryRaw<{ id: string; status: string; provider_calls: number }[]>`
    SELECT id, status, provider_calls FROM payment_attempts WHERE order_id = ${orderId}::uuid FOR UPDATE`;
  if (!attempt) return;

  const cancel = { cancelRequestedAt: at, cancelCausationId: causationId, updatedAt: at };
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
}

/** An order's payment attempts, oldest first. */
export const paymentAttemptsOf = (db: PrismaClient, orderId: string) =>
  db.paymentAttempt.findMany({ where: { orderId }, orderBy: { createdAt: 'asc' } });

/**
 * An operator who fixed an integration fault lets the worker try a parked attempt
 * again, with its persisted key: the refused request stored no result at the provider. An attempt
 * whose order was cancelled is never tried again (a cancellation ends a parked attempt, and this
 * update waits for one under way on the attempt's row, then re-reads it).
 */
export async function retryAttempt(db: PrismaClient, id: string, now: Date): Promise<'retried' | 'not_parked'> {
  const [retried] = await query<{ id: string }>(
    db,
    sql`
      UPDATE payment_attempts AS attempt
         SET status = 'pending', failure_code = NULL, failure_reason = NULL, next_attempt_at = ${now},
             updated_at = ${now}
       WHERE id = ${id}::uuid AND status = 'parked' AND cancel_requested_at IS NULL
         AND NOT EXISTS (SELECT 1 FROM payment_orders
                          WHERE order_id = attempt.order_id AND cancelled_at IS NOT NULL)
      RETURNING pg_notify(${ATTEMPTS_CHANNEL}, '')::text AS id`,
  );
  return retried ? 'retried' : 'not_parked';
}
