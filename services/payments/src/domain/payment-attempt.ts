/**
 * The payment attempt's state machine: what each answer of the provider, and a cancellation,
 * does to an attempt. Pure; the worker and the order-cancelled consumer apply it.
 *
 *   pending ──charge succeeded──▶ captured ──cancel──▶ refund_pending ──refunded──▶ refunded
 *      │  └──charge declined───▶ failed     (the customer's card, or the method they chose)
 *      │  └──integration refused───▶ parked ──operator retry──▶ pending
 *      └──cancel, never charged──▶ cancelled      (parked ──cancel──▶ cancelled)
 *   pending, a call made, cancel ──▶ pending marked: no call is made again; the call under way (or
 *      the one a failure left unknown, looked up by the attempt id) decides:
 *      charged ──▶ refund_pending · declined ──▶ failed · refused, or nothing there ──▶ cancelled
 */
export const ATTEMPT_STATUSES = [
  'pending',
  'captured',
  'failed',
  'parked',
  'refund_pending',
  'refunded',
  'cancelled',
] as const;
export type AttemptStatus = (typeof ATTEMPT_STATUSES)[number];

/** What the provider's final answer to a charge makes of a pending attempt. */
export function afterCharge(
  answer: 'succeeded' | 'declined',
  { cancelRequested }: { cancelRequested: boolean },
): AttemptStatus {
  if (answer === 'declined') return 'failed';
  // Cancelled while the charge was under way: refund it.
  return cancelRequested ? 'refund_pending' : 'captured';
}

/**
 * What a cancellation does to an attempt: `cancelled` when nothing was charged (no call ever
 * reached the provider, or it refused the request), `refund_pending` when it was, `mark` when a
 * call may have reached it — one under way, or one whose answer was lost — and only the provider
 * can tell: the worker then makes no new call, learns what that one did and applies
 * {@link afterCharge} (or cancels, when the provider holds nothing); nothing for an attempt that
 * has already ended.
 */
export function onCancel(attempt: {
  status: string;
  providerCalls: number;
}): Extract<AttemptStatus, 'cancelled' | 'refund_pending'> | 'mark' | undefined {
  if ((attempt.status === 'pending' && attempt.providerCalls === 0) || attempt.status === 'parked') return 'cancelled';
  if (attempt.status === 'pending') return 'mark';
  if (attempt.status === 'captured') return 'refund_pending';
  return undefined;
}

/** The wait before the next provider call: doubling per call from `baseMs`, at most five minutes. */
export function retryDelayMs(providerCalls: number, baseMs: number): number {
  return Math.min(300_000, baseMs * 2 ** Math.max(0, providerCalls - 1));
}

/**
 * A new provider idempotency key for a charge, or for a refund: persisted with the attempt before
 * the call, and sent with every try of that call, so the provider applies it once. A new key
 * means a new operation at the provider — mint one only where a new charge or refund is meant.
 */
export const newChargeKey = (): string => `charge-${crypto.randomUUID()}`;
export const newRefundKey = (): string => `refund-${crypto.randomUUID()}`;

/**
 * The versions an order's payment events carry (their aggregate id is the order's): the charge's
 * answer is 2 (captured or failed; 1 is the attempt itself, which publishes nothing), the refund
 * 3, so a consumer that compares versions sees a refund after its capture.
 */
export const PAYMENT_VERSION = { charged: 2, refunded: 3 } as const;
