import { boundReason } from '@idem/contracts';
import { notify, query, sql } from '@idem/database';
import { enqueue, enqueueInOneStatement } from '@idem/outbox';
import { shop } from '@idem/shop';
import type { Logger } from '@idem/runtime';
import type { PrismaClient, Tx } from '../db.js';
import {
  afterCharge,
  newChargeKey,
  newRefundKey,
  PAYMENT_VERSION,
  retryDelayMs as nextRetryDelayMs,
} from '../domain/payment-attempt.js';
import type { PaymentAttempt } from '../generated/prisma/client.js';
import type { ProviderResult } from '../providers/stripe.js';
import { ATTEMPTS_CHANNEL } from './payment-attempts.js';

/**
 * What the payment worker writes once the provider has answered: the attempt's new state and its
 * event, together (one statement for the common capture, one transaction otherwise); or, for an
 * answer that is not final, when to ask again.
 */
export interface Recorder {
  readonly db: PrismaClient;
  readonly log: Logger;
  readonly now: () => Date;
  /** First retry delay after a failed provider call; doubles per call. */
  readonly retryDelayMs: number;
}

const released = { leaseOwner: null, leaseExpiresAt: null } as const;
/** No call to create was made (a reconciliation): the count that grew at the claim goes back. */
const uncalled = { providerCalls: { decrement: 1 }, ...released };

/**
 * The call got no final answer: it is made again after a delay that doubles per call. A call that
 * never reached the provider (`reached: false`) is taken off the count of calls that may have.
 */
export async function recordRetry(
  { db, now, retryDelayMs }: Recorder,
  attempt: PaymentAttempt,
  reason: string,
  { reached = true }: { reached?: boolean } = {},
) {
  const delay = nextRetryDelayMs(attempt.providerCalls, retryDelayMs);
  await db.paymentAttempt.updateMany({
    where: { id: attempt.id, status: attempt.status },
    data: {
      ...released,
      ...(reached ? {} : { providerCalls: { decrement: 1 } }),
      lastError: boundReason(reason),
      nextAttemptAt: new Date(now().getTime() + delay),
      updatedAt: now(),
    },
  });
}

/**
 * The provider refused the request for what idem builds or holds (an integration fault: its key,
 * the API version, a parameter of ours). Retrying would be refused again and the customer's card
 * was never judged, so the attempt waits for an operator, parked, and the order is told nothing;
 * if nobody fixes it in time, the reservation's expiry cancels the order and frees its stock. An
 * attempt whose order was cancelled meanwhile charged nothing: it ends `cancelled`, no alert.
 */
async function recordParked({ db, log, now }: Recorder, attempt: PaymentAttempt, code: string, reason: string) {
  const [ended] = await query<{ status: string }>(
    db,
    sql`
      UPDATE payment_attempts
         SET status = CASE WHEN cancel_requested_at IS NULL THEN 'parked' ELSE 'cancelled' END,
             failure_code = ${code}, failure_reason = ${boundReason(reason)},
             lease_owner = NULL, lease_expires_at = NULL, updated_at = ${now()}
       WHERE id = ${attempt.id}::uuid AND status = 'pending'
      RETURNING status`,
  );
  if (ended?.status !== 'parked') return;
  log.error(
    { orderId: attempt.orderId, paymentAttemptId: attempt.id, code, reason },
    'payment provider refused the request: an integration fault, the attempt is parked for an operator',
  );
}

/**
 * A cancelled order's attempt for which the provider holds nothing — no call reached it, or none
 * it answered left a payment — ends `cancelled`: nothing was charged and nothing will be.
 */
export async function recordUncharged({ db, now }: Recorder, attempt: PaymentAttempt): Promise<void> {
  await db.paymentAttempt.updateMany({
    where: { id: attempt.id, status: 'pending', cancelRequestedAt: { not: null } },
    data: { ...uncalled, status: 'cancelled', updatedAt: now() },
  });
}

/** The provider's answer to a charge: a final one is recorded with its event, once. */
export async function recordCharge(recorder: Recorder, attempt: PaymentAttempt, result: ProviderResult): Promise<void> {
  if (result.kind === 'retry') return recordRetry(recorder, attempt, result.reason);
  if (result.kind === 'unreached') return recordRetry(recorder, attempt, result.reason, { reached: false });
  if (result.kind === 'processing') {
    // Its id is kept, so the next rounds read this payment instead of creating one.
    await recorder.db.paymentAttempt.updateMany({
      where: { id: attempt.id, status: 'pending' },
      data: { paymentIntentId: result.id },
    });
    return recordRetry(recorder, attempt, `PaymentIntent ${result.id} is processing`);
  }
  if (result.kind === 'rejected') return recordParked(recorder, attempt, result.code, result.reason);
  const at = recorder.now();
  // The common answer, a capture nobody asked to cancel meanwhile, is one statement with its
  // event; a cancellation committed first makes it write nothing (it re-checks the row it waited
  // for), and every other case is decided the plain way, with the same outcome and rows.
  if (result.kind === 'succeeded' && (await captureInOneStatement(recorder.db, attempt, result.id, at))) return;
  await recordFinalAnswer(recorder.db, attempt, result, at);
}

/**
 * A final answer the plain way: the attempt locked and read, then written with its event, in one
 * transaction — what {@link recordCharge} does when its one statement does not apply.
 */
export async function recordFinalAnswer(
  db: PrismaClient,
  attempt: PaymentAttempt,
  result: Extract<ProviderResult, { kind: 'succeeded' | 'declined' }>,
  at: Date,
): Promise<void> {
  await db.$transaction(async (tx) => {
    const [current] = await tx.$queryRaw<{ status: string; cancel_requested_at: Date | null }[]>`
      SELECT status, cancel_requested_at FROM payment_attempts WHERE id = ${attempt.id}::uuid FOR UPDATE`;
    // Another worker (whose lease this one outlived) may have recorded the same answer.
    if (current?.status !== 'pending') return;
    const cancelRequested = current.cancel_requested_at !== null;
    await (result.kind === 'succeeded'
      ? recordCaptured(tx, attempt, result.id, { cancelRequested, at })
      : recordFailed(tx, attempt, result, { cancelRequested, at }));
  });
}

/** An attempt the provider gave its final answer for: no lease, no error, changed now. */
const answered = (at: Date) => ({ ...released, lastError: null, updatedAt: at });

const chargeEvent = (attempt: PaymentAttempt) => ({
  aggregateId: attempt.orderId,
  aggregateVersion: PAYMENT_VERSION.charged,
  correlationId: attempt.correlationId,
  causationId: attempt.causationId,
});

/**
 * A pending attempt with no cancellation asked for is captured, with its event, in one statement
 * (no transaction); false when it is not such an attempt, and nothing is written.
 */
async function captureInOneStatement(db: PrismaClient, attempt: PaymentAttempt, paymentIntentId: string, at: Date) {
  const event = enqueueInOneStatement(
    db,
    shop,
    capturedEvent(attempt, paymentIntentId),
    at,
    sql`EXISTS (SELECT 1 FROM captured)`,
  );
  const [{ captured } = { captured: 0 }] = await query<{ captured: number }>(
    db,
    sql`
      WITH captured AS (
        UPDATE payment_attempts
           SET status = ${afterCharge('succeeded', { cancelRequested: false })}, payment_intent_id = ${paymentIntentId},
               lease_owner = NULL, lease_expires_at = NULL, last_error = NULL, updated_at = ${at}
         WHERE id = ${attempt.id}::uuid AND status = 'pending' AND cancel_requested_at IS NULL
        RETURNING 1
      ), event AS (${event.insert})
      SELECT count(*)::int AS captured FROM captured`,
  );
  if (captured === 1) event.afterCommit();
  return captured === 1;
}

async function recordCaptured(
  tx: Tx,
  attempt: PaymentAttempt,
  paymentIntentId: string,
  { cancelRequested, at }: { cancelRequested: boolean; at: Date },
) {
  const status = afterCharge('succeeded', { cancelRequested });
  await tx.paymentAttempt.update({
    where: { id: attempt.id },
    data: {
      ...answered(at),
      paymentIntentId,
      status,
      ...(status === 'refund_pending' ? { refundIdempotencyKey: newRefundKey(), nextAttemptAt: at } : {}),
    },
  });
  if (status === 'refund_pending') await notify(tx, ATTEMPTS_CHANNEL); // cancelled while charging: refund it
  await enqueue(tx, shop, capturedEvent(attempt, paymentIntentId), at);
}

function capturedEvent(attempt: PaymentAttempt, paymentIntentId: string) {
  const { orderId, amountCents, currency } = attempt;
  return {
    ...chargeEvent(attempt),
    type: 'payments.payment-captured.v1' as const,
    body: { orderId, paymentIntentId, amountCents, currency },
  };
}

async function recordFailed(
  tx: Tx,
  attempt: PaymentAttempt,
  { code, reason }: { code: string; reason: string },
  { cancelRequested, at }: { cancelRequested: boolean; at: Date },
) {
  await tx.paymentAttempt.update({
    where: { id: attempt.id },
    data: {
      ...answered(at),
      status: afterCharge('declined', { cancelRequested }),
      failureCode: code,
      failureReason: boundReason(reason),
    },
  });
  await enqueue(
    tx,
    shop,
    {
      ...chargeEvent(attempt),
      type: 'payments.payment-failed.v1',
      body: { orderId: attempt.orderId, code, reason: boundReason(reason) },
    },
    at,
  );
}

/** The provider's answer to a refund: a success is recorded with its event, once; anything else is tried again. */
export async function recordRefund(recorder: Recorder, attempt: PaymentAttempt, result: ProviderResult): Promise<void> {
  if (result.kind === 'processing') return recordRetry(recorder, attempt, `refund ${result.id} is processing`);
  // A refund the provider refuses is not a payment failure: keep retrying and make it visible.
  if (result.kind === 'declined' || result.kind === 'rejected')
    return recordRetry(recorder, attempt, `${result.code}: ${result.reason}`);
  if (result.kind !== 'succeeded') return recordRetry(recorder, attempt, result.reason);
  await recorder.db.$transaction(async (tx) => {
    const at = recorder.now();
    const updated = await tx.paymentAttempt.updateMany({
      where: { id: attempt.id, status: 'refund_pending' },
      data: { ...answered(at), status: 'refunded', refundId: result.id },
    });
    if (updated.count === 0) return;
    const { orderId, amountCents, currency } = attempt;
    await enqueue(
      tx,
      shop,
      {
        aggregateId: orderId,
        aggregateVersion: PAYMENT_VERSION.refunded,
        correlationId: attempt.correlationId,
        causationId: attempt.cancelCausationId ?? attempt.causationId,
        type: 'payments.payment-refunded.v1',
        body: { orderId, refundId: result.id, amountCents, currency },
      },
      at,
    );
  });
}

/**
 * Nothing to do for the attempt until `at` (its provider's search lags behind the last call, or
 * its payment waits at the provider). `updatedAt` moves only when the provider was asked: the
 * search lag counts from it.
 */
export async function lookAgainAt(
  { db, now }: Recorder,
  attempt: PaymentAttempt,
  at: Date,
  { asked }: { asked: boolean },
): Promise<void> {
  await db.paymentAttempt.updateMany({
    where: { id: attempt.id, status: 'pending' },
    data: { ...uncalled, nextAttemptAt: at, ...(asked ? { updatedAt: now() } : {}) },
  });
}

/** The provider has no payment under the attempt's old key: a new key, persisted before it is ever used. */
export async function renewChargeKey({ db, log, now }: Recorder, attempt: PaymentAttempt): Promise<void> {
  await db.paymentAttempt.updateMany({
    where: { id: attempt.id, status: 'pending' },
    data: {
      ...uncalled,
      idempotencyKey: newChargeKey(),
      idempotencyKeyCreatedAt: now(),
      nextAttemptAt: now(),
      lastError: boundReason('no payment at the provider under the old key: a new key is used'),
      updatedAt: now(),
    },
  });
  log.warn(
    { orderId: attempt.orderId, paymentAttemptId: attempt.id },
    'payment attempt reconciled: the provider has no payment for it, a new idempotency key is used',
  );
}
