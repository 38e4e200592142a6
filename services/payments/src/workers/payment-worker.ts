import { randomUUID } from 'node:crypto';
import { inSpan } from '@idem/contracts';
import { claimLeased } from '@idem/database';
import { noFaults, type Faults } from '@idem/faults';
import type { DeliveryJournal } from '@idem/messaging';
import { pollingWorker, processName, awaitAll, type BackgroundWorker, type Logger } from '@idem/runtime';
import {
  lookAgainAt,
  recordCharge,
  recordRefund,
  recordRetry,
  recordUncharged,
  renewChargeKey,
  type Recorder,
} from '../application/provider-answers.js';
import { ATTEMPTS_CHANNEL } from '../application/payment-attempts.js';
import type { PrismaClient } from '../db.js';
import type { PaymentAttempt } from '../generated/prisma/client.js';
import {
  createCharge,
  createRefund,
  readCharge,
  searchCharges,
  type ProviderCall,
  type StripeClient,
} from '../providers/stripe.js';

export interface PaymentWorkerOptions {
  readonly db: PrismaClient;
  readonly stripe: StripeClient;
  readonly log: Logger;
  readonly now?: () => Date;
  readonly faults?: Faults;
  /** Where each provider call is recorded for people to see (the console). */
  readonly journal?: DeliveryJournal;
  /** How long a claimed attempt belongs to this worker before another may take it. @defaultValue 60000 */
  readonly leaseMs?: number;
  /** When given, the worker LISTENs for attempts that become due and takes them at once; it polls either way. */
  readonly databaseUrl?: string;
  /** How often to look for due attempts without a notification (retries come due this way). @defaultValue 500 */
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

/** The worker's settings with their defaults, and its lease owner name: what its steps share. */
type PaymentWorker = Recorder &
  Required<Omit<PaymentWorkerOptions, 'journal' | 'databaseUrl' | keyof Recorder>> & {
    readonly journal?: DeliveryJournal;
    readonly owner: string;
  };

/**
 * Charges and refunds due payment attempts. Each attempt is claimed with a lease (SKIP LOCKED,
 * so workers never take the same one at once), the provider is called outside any
 * transaction with the attempt's persisted idempotency key, and the result and its event are
 * recorded together (one statement for a capture, or one transaction). A crash between the provider's answer and the record
 * leaves the lease to expire; the next call with the same key returns the same PaymentIntent.
 */
export function createPaymentWorker(options: PaymentWorkerOptions): BackgroundWorker & { runOnce(): Promise<number> } {
  const {
    now = () => new Date(),
    faults = noFaults,
    leaseMs = 60_000,
    pollIntervalMs = 500,
    batchSize = 10,
    retryDelayMs = 1000,
    maxKeyAgeMs = 12 * 3_600_000,
    searchLagMs = 5 * 60_000,
  } = options;
  const worker: PaymentWorker = {
    ...options,
    now,
    faults,
    leaseMs,
    pollIntervalMs,
    batchSize,
    retryDelayMs,
    maxKeyAgeMs,
    searchLagMs,
    owner: `payments-worker-${randomUUID()}`,
  };
  /** The claimed attempts are independent (one per order, each with its own key): handled side by side. */
  async function runOnce(): Promise<number> {
    const attempts = await claim(worker);
    await awaitAll(attempts.map((attempt) => traced(worker, attempt)));
    return attempts.length;
  }
  const { databaseUrl } = options;
  return pollingWorker('payment worker', runOnce, {
    idleMs: worker.pollIntervalMs,
    batchSize: worker.batchSize,
    log: worker.log,
    ...(databaseUrl ? { wakeOn: { databaseUrl, channel: ATTEMPTS_CHANNEL } } : {}),
  });
}

function claim({ db, owner, leaseMs, batchSize, now }: PaymentWorker): Promise<PaymentAttempt[]> {
  // provider_calls counts calls that may have happened: it grows before the call.
  return claimLeased<PaymentAttempt>(db, {
    table: 'payment_attempts',
    statuses: ['pending', 'refund_pending'],
    counter: 'provider_calls',
    owner,
    leaseMs,
    batchSize,
    now: now(),
  });
}

/** One attempt, in the trace of the delivery that made it due (its provider call and event too). */
const traced = (worker: PaymentWorker, attempt: PaymentAttempt) =>
  inSpan(
    attempt.status === 'pending' ? 'charge' : 'refund',
    { continues: attempt.traceparent, attributes: { 'idem.order_id': attempt.orderId } },
    () => handle(worker, attempt),
  );

async function handle(worker: PaymentWorker, attempt: PaymentAttempt): Promise<void> {
  const { faults, stripe, now } = worker;
  const keyTooOld = now().getTime() - attempt.idempotencyKeyCreatedAt.getTime() > worker.maxKeyAgeMs;
  if (attempt.status === 'pending' && attempt.paymentIntentId) {
    await recordCharge(worker, attempt, await readCharge(stripe, attempt.paymentIntentId));
  } else if (attempt.status === 'pending' && attempt.cancelRequestedAt) {
    // Its order was cancelled after a call that may have reached the provider: no call is made
    // again; what that one did is looked up (nothing there: the attempt ends cancelled).
    await (attempt.providerCalls > 1 ? reconcile(worker, attempt) : recordUncharged(worker, attempt));
  } else if (attempt.status === 'pending' && attempt.providerCalls > 1 && keyTooOld) {
    await reconcile(worker, attempt);
  } else if (attempt.status === 'pending') {
    // The key was persisted with the attempt before the first call; every call reuses it.
    // (A new key per try would charge again on a retry: the payments tests' lesson.)
    const key = attempt.idempotencyKey;
    const call = journaled(worker, attempt, 'charge', key, await createCharge(stripe, attempt, key));
    // The provider has answered and nothing is recorded yet: the window the persisted key covers.
    faults.crashIf('crash-after-provider-call', 'payments.worker'); // charged, not recorded
    await recordCharge(worker, attempt, call.result);
  } else {
    const key = attempt.refundIdempotencyKey!;
    const payment = { paymentIntentId: attempt.paymentIntentId!, orderId: attempt.orderId };
    const call = journaled(worker, attempt, 'refund', key, await createRefund(stripe, payment, key));
    faults.crashIf('crash-after-provider-call', 'payments.worker'); // refunded, not recorded
    await recordRefund(worker, attempt, call.result);
  }
  worker.log.info(
    {
      orderId: attempt.orderId,
      paymentAttemptId: attempt.id,
      operation: attempt.status === 'pending' ? 'charge' : 'refund',
    },
    'payment attempt handled',
  );
}

/** Journals one provider call for the console, with the key it carried and whether the provider replayed an earlier answer. */
function journaled(
  { journal, now }: PaymentWorker,
  attempt: PaymentAttempt,
  operation: 'charge' | 'refund',
  idempotencyKey: string,
  call: ProviderCall,
): ProviderCall {
  journal?.record({
    kind: 'provider-call',
    at: now().toISOString(),
    process: processName('payments'),
    correlationId: attempt.correlationId,
    orderId: attempt.orderId,
    operation,
    idempotencyKey,
    ...(call.objectId ? { objectId: call.objectId } : {}),
    replayed: call.replayed,
    result: call.result.kind,
  });
  return call;
}

/**
 * An attempt whose key is too old to send again (the provider may have forgotten it), or whose
 * order was cancelled after a call that may have reached the provider: look its payment up by
 * the attempt id in the metadata, and record what the provider did. Only when the provider has no
 * payment for it — asked once its search has caught up with the last call — does the attempt get
 * a new key, persisted before it is ever used, or, cancelled, end without a charge.
 */
async function reconcile(worker: PaymentWorker, attempt: PaymentAttempt): Promise<void> {
  const { now, searchLagMs } = worker;
  const searchable = attempt.updatedAt.getTime() + searchLagMs;
  if (now().getTime() < searchable) return lookAgainAt(worker, attempt, new Date(searchable), { asked: false });
  let results;
  try {
    results = await searchCharges(worker.stripe, attempt.id);
  } catch (error) {
    return recordRetry(worker, attempt, `reconciliation failed: ${(error as Error)?.message ?? String(error)}`);
  }
  // What the provider did is recorded as a direct answer would be (a success wins over a
  // decline); one still processing keeps its id and is read by it from then on.
  const known = (['succeeded', 'declined', 'processing'] as const)
    .map((kind) => results.find((result) => result.kind === kind))
    .find(Boolean);
  if (known) return recordCharge(worker, attempt, known);
  // Waiting at the provider for something else (an action): look again later.
  if (results.length > 0) return lookAgainAt(worker, attempt, new Date(now().getTime() + searchLagMs), { asked: true });
  return attempt.cancelRequestedAt ? recordUncharged(worker, attempt) : renewChargeKey(worker, attempt);
}
