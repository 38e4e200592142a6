import { randomUUID } from 'node:crypto';
import { boundReason, inSpan } from '@idem/contracts';
import { claimLeased } from '@idem/database';
import { noFaults, type Faults } from '@idem/faults';
import { enqueue } from '@idem/outbox';
import { pollingWorker, processName, settleAll, type BackgroundWorker, type Logger } from '@idem/runtime';
import type Stripe from 'stripe';
import type { PrismaClient } from '../db.js';
import {
  afterCharge,
  newChargeKey,
  newRefundKey,
  retryDelayMs as nextRetryDelayMs,
} from '../domain/payment-attempt.js';
import type { PaymentAttempt } from '../generated/prisma/client.js';
import type { DeliveryJournal } from '@idem/messaging';
import { classifyProviderError, type ProviderResult } from '../stripe.js';

export interface PaymentWorkerOptions {
  readonly db: PrismaClient;
  readonly stripe: Stripe;
  readonly log: Logger;
  readonly now?: () => Date;
  readonly faults?: Faults;
  /** Where each provider call is recorded for people to see (the console). */
  readonly journal?: DeliveryJournal;
  /** How long a claimed attempt belongs to this worker before another may take it. @defaultValue 60000 */
  readonly leaseMs?: number;
  /** @defaultValue 500 */
  readonly pollIntervalMs?: number;
  /** @defaultValue 10 */
  readonly batchSize?: number;
  /** First retry delay after a failed provider call; doubles per call, at most 5 minutes. @defaultValue 1000 */
  readonly retryDelayMs?: number;
  /**
   * How long an idempotency key is used. Stripe forgets keys after about 24 hours; a retry
   * after that could charge again, so an older attempt is first looked up by its id instead.
   * @defaultValue 12 hours
   */
  readonly maxKeyAgeMs?: number;
  /** How long after the last call the provider's search may still miss its payment. @defaultValue 5 minutes */
  readonly searchLagMs?: number;
}

/**
 * Charges and refunds due payment attempts. Each attempt is claimed with a lease (SKIP LOCKED,
 * so workers never take the same one at once), the provider is called outside any
 * transaction with the attempt's persisted idempotency key, and the result and its event are
 * recorded together in one transaction. A crash between the provider's answer and the record
 * leaves the lease to expire; the next call with the same key returns the same PaymentIntent.
 */
export function createPaymentWorker(options: PaymentWorkerOptions): BackgroundWorker & { runOnce(): Promise<number> } {
  const {
    db,
    stripe,
    log,
    now = () => new Date(),
    faults = noFaults,
    journal,
    leaseMs = 60_000,
    pollIntervalMs = 500,
    batchSize = 10,
    retryDelayMs = 1000,
    maxKeyAgeMs = 12 * 3_600_000,
    searchLagMs = 5 * 60_000,
  } = options;
  const owner = `payments-worker-${randomUUID()}`;

  async function claim(): Promise<PaymentAttempt[]> {
    // provider_calls counts calls that may have happened: it grows before the call.
    const ids = await claimLeased(db, {
      table: 'payment_attempts',
      statuses: ['pending', 'refund_pending'],
      counter: 'provider_calls',
      owner,
      leaseMs,
      batchSize,
      now: now(),
    });
    if (ids.length === 0) return [];
    return db.paymentAttempt.findMany({ where: { id: { in: ids } }, orderBy: { nextAttemptAt: 'asc' } });
  }

  async function charge(attempt: PaymentAttempt): Promise<ProviderResult> {
    try {
      const intent = await stripe.paymentIntents.create(
        {
          amount: attempt.amountCents,
          currency: attempt.currency,
          payment_method: attempt.paymentMethod,
          confirm: true,
          // Confirmed on the server with no customer present to follow a redirect: Stripe
          // requires saying so when redirect-based methods are enabled on the account.
          automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
          metadata: { order_id: attempt.orderId, payment_attempt_id: attempt.id },
        },
        // The key was persisted with the attempt before the first call; every call reuses it.
        // (The wrong-way switch of a lesson makes a new key per try: a retry charges again.)
        {
          idempotencyKey: faults.fires('mistake-new-provider-key-per-try', 'payments.worker')
            ? newChargeKey()
            : attempt.idempotencyKey,
        },
      );
      return recordCall(attempt, 'charge', resultOf(intent), intent.lastResponse?.headers, intent.id);
    } catch (error) {
      return recordCall(attempt, 'charge', classifyProviderError(error), (error as { headers?: Headers }).headers);
    }
  }

  /**
   * A payment the provider is still processing (a bank debit) is never created again: the
   * worker reads it by its id until it ends.
   */
  async function poll(attempt: PaymentAttempt): Promise<ProviderResult> {
    try {
      return resultOf(await stripe.paymentIntents.retrieve(attempt.paymentIntentId!));
    } catch (error) {
      return classifyProviderError(error);
    }
  }

  type Headers = Record<string, string | undefined> | undefined;
  /** Journals one provider call, with the key it carried and whether the provider replayed an earlier answer. */
  function recordCall(
    attempt: PaymentAttempt,
    operation: 'charge' | 'refund',
    result: ProviderResult,
    headers: Headers,
    objectId?: string,
  ): ProviderResult {
    journal?.record({
      kind: 'provider-call',
      at: now().toISOString(),
      process: processName('payments'),
      correlationId: attempt.correlationId,
      orderId: attempt.orderId,
      operation,
      idempotencyKey: operation === 'charge' ? attempt.idempotencyKey : attempt.refundIdempotencyKey!,
      ...(objectId ? { objectId } : {}),
      replayed: headers?.['idempotent-replayed'] === 'true',
      result: result.kind,
    });
    return result;
  }

  async function refund(attempt: PaymentAttempt): Promise<ProviderResult> {
    try {
      const result = await stripe.refunds.create(
        { payment_intent: attempt.paymentIntentId!, metadata: { order_id: attempt.orderId } },
        { idempotencyKey: attempt.refundIdempotencyKey! },
      );
      return recordCall(
        attempt,
        'refund',
        { kind: 'succeeded', id: result.id },
        result.lastResponse?.headers,
        result.id,
      );
    } catch (error) {
      const classified = recordCall(
        attempt,
        'refund',
        classifyProviderError(error),
        (error as { headers?: Headers }).headers,
      );
      // A refund the provider refuses is not a payment failure: keep retrying and make it visible.
      return classified.kind === 'declined' || classified.kind === 'rejected'
        ? { kind: 'retry', reason: `${classified.code}: ${classified.reason}` }
        : classified;
    }
  }

  async function recordRetry(attempt: PaymentAttempt, reason: string): Promise<void> {
    const delay = nextRetryDelayMs(attempt.providerCalls, retryDelayMs);
    await db.paymentAttempt.updateMany({
      where: { id: attempt.id, status: attempt.status },
      data: {
        leaseOwner: null,
        leaseExpiresAt: null,
        lastError: boundReason(reason),
        nextAttemptAt: new Date(now().getTime() + delay),
        updatedAt: now(),
      },
    });
  }

  /**
   * The provider refused the request itself (an integration fault: configuration, API version,
   * parameters). Retrying would be refused again and the customer's card was never judged, so
   * the attempt waits for an operator and the order is told nothing.
   */
  async function recordNeedsAttention(attempt: PaymentAttempt, code: string, reason: string): Promise<void> {
    await db.paymentAttempt.updateMany({
      where: { id: attempt.id, status: 'pending' },
      data: {
        status: 'needs_attention',
        failureCode: code,
        failureReason: boundReason(reason),
        leaseOwner: null,
        leaseExpiresAt: null,
        updatedAt: now(),
      },
    });
    log.error(
      { orderId: attempt.orderId, paymentAttemptId: attempt.id, code, reason },
      'payment provider refused the request: an integration fault, the attempt needs an operator',
    );
  }

  async function recordCharge(attempt: PaymentAttempt, result: ProviderResult): Promise<void> {
    if (result.kind === 'retry') return recordRetry(attempt, result.reason);
    if (result.kind === 'processing') {
      // Its id is kept, so the next rounds read this payment instead of creating one.
      await db.paymentAttempt.updateMany({
        where: { id: attempt.id, status: 'pending' },
        data: { paymentIntentId: result.id },
      });
      return recordRetry(attempt, `PaymentIntent ${result.id} is processing`);
    }
    if (result.kind === 'rejected') return recordNeedsAttention(attempt, result.code, result.reason);
    await db.$transaction(async (tx) => {
      const at = now();
      const [current] = await tx.$queryRaw<{ status: string; cancel_requested_at: Date | null }[]>`
        SELECT status, cancel_requested_at FROM payment_attempts WHERE id = ${attempt.id}::uuid FOR UPDATE`;
      // Another worker (whose lease this one outlived) may have recorded the same answer.
      if (current?.status !== 'pending') return;
      const event = {
        aggregateId: attempt.orderId,
        aggregateVersion: 2,
        correlationId: attempt.correlationId,
        causationId: attempt.causationId,
      };
      const done = { leaseOwner: null, leaseExpiresAt: null, lastError: null, updatedAt: at };
      const cancelRequested = current.cancel_requested_at !== null;
      if (result.kind === 'succeeded') {
        const status = afterCharge('succeeded', { cancelRequested });
        await tx.paymentAttempt.update({
          where: { id: attempt.id },
          data: {
            ...done,
            paymentIntentId: result.id,
            status,
            ...(status === 'refund_pending' ? { refundIdempotencyKey: newRefundKey(), nextAttemptAt: at } : {}),
          },
        });
        await enqueue(
          tx,
          {
            ...event,
            type: 'payments.payment-captured.v1',
            body: {
              orderId: attempt.orderId,
              paymentIntentId: result.id,
              amountCents: attempt.amountCents,
              currency: attempt.currency,
            },
          },
          at,
        );
      } else {
        await tx.paymentAttempt.update({
          where: { id: attempt.id },
          data: {
            ...done,
            status: afterCharge('declined', { cancelRequested }),
            failureCode: result.code,
            failureReason: boundReason(result.reason),
          },
        });
        await enqueue(
          tx,
          {
            ...event,
            type: 'payments.payment-failed.v1',
            body: { orderId: attempt.orderId, code: result.code, reason: boundReason(result.reason) },
          },
          at,
        );
      }
    });
  }

  async function recordRefund(attempt: PaymentAttempt, result: ProviderResult): Promise<void> {
    if (result.kind === 'processing') return recordRetry(attempt, `refund ${result.id} is processing`);
    if (result.kind !== 'succeeded') return recordRetry(attempt, result.reason);
    await db.$transaction(async (tx) => {
      const at = now();
      const updated = await tx.paymentAttempt.updateMany({
        where: { id: attempt.id, status: 'refund_pending' },
        data: {
          status: 'refunded',
          refundId: result.id,
          leaseOwner: null,
          leaseExpiresAt: null,
          lastError: null,
          updatedAt: at,
        },
      });
      if (updated.count === 0) return;
      await enqueue(
        tx,
        {
          aggregateId: attempt.orderId,
          aggregateVersion: 3,
          correlationId: attempt.correlationId,
          causationId: attempt.cancelCausationId ?? attempt.causationId,
          type: 'payments.payment-refunded.v1',
          body: {
            orderId: attempt.orderId,
            refundId: result.id,
            amountCents: attempt.amountCents,
            currency: attempt.currency,
          },
        },
        at,
      );
    });
  }

  /**
   * An attempt whose key is too old to send again (the provider may have forgotten it): look
   * its payment up by the attempt id in the metadata, and record what the provider did. Only
   * when the provider has no payment for it — asked once its search has caught up with the
   * last call — does the attempt get a new key, persisted before it is ever used.
   */
  async function reconcile(attempt: PaymentAttempt): Promise<void> {
    // No call to create is made here: the count that grew at the claim goes back.
    const untouched = { providerCalls: { decrement: 1 }, leaseOwner: null, leaseExpiresAt: null };
    const searchable = attempt.updatedAt.getTime() + searchLagMs;
    if (now().getTime() < searchable) {
      await db.paymentAttempt.updateMany({
        where: { id: attempt.id, status: 'pending' },
        data: { ...untouched, nextAttemptAt: new Date(searchable) },
      });
      return;
    }
    let found: Stripe.PaymentIntent[];
    try {
      found = (await stripe.paymentIntents.search({ query: `metadata['payment_attempt_id']:'${attempt.id}'` })).data;
    } catch (error) {
      return recordRetry(attempt, `reconciliation failed: ${(error as Error)?.message ?? String(error)}`);
    }
    // What the provider did is recorded as a direct answer would be (a success wins over a
    // decline); one still processing keeps its id and is read by it from then on.
    const results = found.map(resultOf);
    const known = (['succeeded', 'declined', 'processing'] as const)
      .map((kind) => results.find((result) => result.kind === kind))
      .find(Boolean);
    if (known) return recordCharge(attempt, known);
    if (found.length > 0) {
      // Waiting at the provider for something else (an action): look again later.
      await db.paymentAttempt.updateMany({
        where: { id: attempt.id, status: 'pending' },
        data: { ...untouched, nextAttemptAt: new Date(now().getTime() + searchLagMs), updatedAt: now() },
      });
      return;
    }
    await db.paymentAttempt.updateMany({
      where: { id: attempt.id, status: 'pending' },
      data: {
        ...untouched,
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

  async function handle(attempt: PaymentAttempt): Promise<void> {
    const keyTooOld = now().getTime() - attempt.idempotencyKeyCreatedAt.getTime() > maxKeyAgeMs;
    if (attempt.status === 'pending' && attempt.paymentIntentId) {
      await recordCharge(attempt, await poll(attempt));
    } else if (attempt.status === 'pending' && attempt.providerCalls > 1 && keyTooOld) {
      await reconcile(attempt);
    } else if (attempt.status === 'pending') {
      const result = await charge(attempt);
      // The provider has answered and nothing is recorded yet: the window the persisted key covers.
      faults.crashIf('crash-after-provider-call', 'payments.worker'); // charged, not recorded
      await recordCharge(attempt, result);
    } else {
      const result = await refund(attempt);
      faults.crashIf('crash-after-provider-call', 'payments.worker'); // refunded, not recorded
      await recordRefund(attempt, result);
    }
    log.info(
      {
        orderId: attempt.orderId,
        paymentAttemptId: attempt.id,
        operation: attempt.status === 'pending' ? 'charge' : 'refund',
      },
      'payment attempt handled',
    );
  }

  /** One attempt, in the trace of the delivery that made it due (its provider call and event too). */
  const traced = (attempt: PaymentAttempt) =>
    inSpan(
      attempt.status === 'pending' ? 'charge' : 'refund',
      { continues: attempt.traceparent, attributes: { 'idem.order_id': attempt.orderId } },
      () => handle(attempt),
    );

  /** The claimed attempts are independent (one per order, each with its own key): handled side by side. */
  async function runOnce(): Promise<number> {
    const attempts = await claim();
    await settleAll(attempts.map(traced));
    return attempts.length;
  }

  return pollingWorker('payment worker', runOnce, { idleMs: pollIntervalMs, log });
}

/** What a PaymentIntent's status means for the attempt. */
function resultOf(intent: Stripe.PaymentIntent): ProviderResult {
  if (intent.status === 'succeeded') return { kind: 'succeeded', id: intent.id };
  if (intent.status === 'processing') return { kind: 'processing', id: intent.id };
  if (intent.status === 'requires_payment_method' && intent.last_payment_error) {
    const error = intent.last_payment_error;
    return { kind: 'declined', code: error.code ?? 'card_error', reason: error.message ?? 'declined' };
  }
  return { kind: 'retry', reason: `PaymentIntent ${intent.id} is ${intent.status}` };
}
