import type { OneStatementEffect } from '@idem/inbox';
import type { MessageOf } from '@idem/shop';
import type { PrismaClient, Tx } from '../db.js';
import { onCapture } from '../domain/order-status.js';
import { announceCancellation } from './cancel-order.js';
import { changeStatus, lockOrder, moveIfAllowed, moveWrite } from './orders.js';

export type CaptureResult =
  | { readonly kind: 'paid' }
  | { readonly kind: 'already_paid' }
  /** Not taken as the order's payment: the order's cancellation is announced (again), so payments refunds it. */
  | { readonly kind: 'refused'; readonly refusal: Refusal; readonly status: string };

/** Why a capture was not taken: the order could no longer be paid, the amount was not its total, or there is no such order. */
type Refusal = 'not_payable' | 'mischarged' | 'unknown_order';

/**
 * A capture reached the order. Each hop checks what it is told where money is involved: only the
 * order's total, in its currency, pays a waiting order — inventory, which asked payments for the
 * charge, cannot name the amount. A capture that is not (mischarged) cancels the order; one for
 * an order that can no longer be paid (a cancellation that overtook the charge), or for an order
 * orders never took (unknown_order), announces the cancellation again. Either way payments refunds it — a cancelled
 * order keeps no money, whatever order its events came in — and the refusal is recorded. The
 * common case, a capture that pays its order, is one statement (`moveIfAllowed`); any other is
 * decided the plain way (`decideCapture`), with the same outcome and rows.
 */
export async function takeCapture(
  tx: Tx,
  capture: MessageOf<'orders.payment-captured.v1'>,
  at: Date,
): Promise<CaptureResult> {
  return (await moveIfAllowed(tx, capture.body.orderId, 'payment-captured', paying(capture, at)))
    ? { kind: 'paid' }
    : decideCapture(tx, capture, at);
}

/** {@link takeCapture}'s common case, a capture that pays its order, as the inbox's one statement with its record. */
export function captureInOneStatement(capture: MessageOf<'orders.payment-captured.v1'>, at: Date): OneStatementEffect {
  return { with: moveWrite(capture.body.orderId, 'payment-captured', paying(capture, at)), wrote: 'moved' };
}

const paying = (capture: MessageOf<'orders.payment-captured.v1'>, at: Date) => ({
  now: at,
  causationId: capture.messageId,
  paying: capture.body,
});

/** The plain way of {@link takeCapture}: lock the order and read it, decide (`onCapture`), then write. */
export async function decideCapture(
  tx: Tx,
  capture: MessageOf<'orders.payment-captured.v1'>,
  at: Date,
): Promise<CaptureResult> {
  const { orderId } = capture.body;
  const order = await lockOrder(tx, orderId);
  if (!order) return refuseUnknown(tx, capture, at);
  const decision = onCapture(order, capture.body);
  const change = { now: at, causationId: capture.messageId };
  if (decision === 'already_paid') return { kind: 'already_paid' };
  if (decision === 'pay') {
    await changeStatus(tx, order, 'PAID', change);
    return { kind: 'paid' };
  }
  const { amountCents, currency } = capture.body;
  const reason =
    decision === 'mischarged'
      ? `The payment taken (${amountCents} ${currency}) was not the order's total (${order.totalCents} ${order.currency}): the order is cancelled and the payment refunded.`
      : `The order is ${order.status.toLowerCase()} and can no longer be paid: the payment is refunded.`;
  const announced =
    decision === 'mischarged' ? await changeStatus(tx, order, 'CANCELLED', { ...change, reason }) : order;
  await recordRefusal(tx, capture, decision, order.status, at);
  await announceCancellation(tx, announced, {
    reason,
    correlationId: capture.correlationId,
    causationId: capture.messageId,
    at,
  });
  return { kind: 'refused', refusal: decision, status: order.status };
}

/**
 * A capture for an order orders never took (a stock-reserved event no placed order caused): no
 * order keeps it, so its cancellation is announced for payments to refund, as for any refusal.
 */
async function refuseUnknown(
  tx: Tx,
  capture: MessageOf<'orders.payment-captured.v1'>,
  at: Date,
): Promise<CaptureResult> {
  const { orderId } = capture.body;
  await recordRefusal(tx, capture, 'unknown_order', UNKNOWN, at);
  await announceCancellation(
    tx,
    { orderId, version: 0 },
    {
      reason: `No order ${orderId} was placed: the payment is refunded.`,
      correlationId: capture.correlationId,
      causationId: capture.messageId,
      at,
    },
  );
  return { kind: 'refused', refusal: 'unknown_order', status: UNKNOWN };
}

/** The status a refusal records for an order orders does not know. */
const UNKNOWN = 'UNKNOWN';

function recordRefusal(
  tx: Tx,
  { messageId, body }: MessageOf<'orders.payment-captured.v1'>,
  refusal: Refusal,
  orderStatus: string,
  at: Date,
) {
  return tx.refusedCapture.create({
    data: {
      messageId,
      orderId: body.orderId,
      paymentIntentId: body.paymentIntentId,
      amountCents: body.amountCents,
      currency: body.currency,
      refusal,
      orderStatus,
      refusedAt: at,
    },
  });
}

export const REFUSED_CAPTURES_HELP =
  "Captures not taken as their order's payment, each refunded: not_payable (the order could no longer be paid), mischarged (not its total), unknown_order (no such order).";

/** How many captures were refused, by refusal: the gauge an alert on mischarges reads. */
export async function refusedCaptures(db: PrismaClient) {
  const counts = await db.refusedCapture.groupBy({ by: ['refusal'], _count: true });
  return counts.map((count) => ({ labels: { refusal: count.refusal }, value: count._count }));
}
