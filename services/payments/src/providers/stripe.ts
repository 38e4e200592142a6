import Stripe from 'stripe';

/** The provider's client, as the payment worker and the service are given it. */
export type StripeClient = Stripe;

/**
 * The official SDK, pointed at real Stripe or at a Stripe-compatible server (the simulator).
 * Our worker retries on its own schedule with the persisted key; the SDK's own retries are
 * off (it still retries a closed connection once, with the same key).
 */
export function createStripeClient({
  apiKey,
  apiBase,
  timeoutMs = 20_000,
}: {
  apiKey: string;
  apiBase?: string;
  timeoutMs?: number;
}): Stripe {
  const base = apiBase ? new URL(apiBase) : undefined;
  return new Stripe(apiKey, {
    maxNetworkRetries: 0,
    timeout: timeoutMs,
    ...(base
      ? {
          host: base.hostname,
          port: base.port || (base.protocol === 'https:' ? 443 : 80),
          protocol: base.protocol === 'https:' ? 'https' : 'http',
        }
      : {}),
  });
}

export type ProviderResult =
  | { readonly kind: 'succeeded'; readonly id: string }
  /** Accepted and under way at the provider (bank debits): read it again by its id later. */
  | { readonly kind: 'processing'; readonly id: string }
  | { readonly kind: 'declined'; readonly code: string; readonly reason: string }
  | { readonly kind: 'rejected'; readonly code: string; readonly reason: string }
  /** The call never reached the provider (its connection was refused): nothing can have happened there. */
  | { readonly kind: 'unreached'; readonly reason: string }
  | { readonly kind: 'retry'; readonly reason: string };

/**
 * Sorts a provider error:
 * - a card error is the customer's final answer (`declined`);
 * - a request refused for what the customer chose — the payment method they sent does not exist,
 *   is not usable, or does not take the currency — is theirs too (`declined`): the order fails with
 *   the provider's message and its stock goes back;
 * - a request the provider refuses for anything idem builds or holds (a key it does not accept,
 *   an API version, a parameter of ours) is an integration fault (`rejected`): the same request
 *   would be refused again, and the customer's card was never judged, so an operator must look;
 * - a connection the provider's address refused, on the first try, never carried the request
 *   (`unreached`): retried later, and not counted as a call that may have reached it;
 * - a lost connection, a timeout, 409, 429 or 5xx (and anything else) is retried later with the
 *   same key: the request may have reached the provider. (The SDK makes every status but 400, 401,
 *   402, 403, 404 and 429 a StripeAPIError: a 409 conflict never arrives as an invalid request.)
 */
export function classifyProviderError(error: unknown): ProviderResult {
  if (neverSent(error)) return { kind: 'unreached', reason: (error as Error).message };
  if (error instanceof Stripe.errors.StripeCardError) {
    return { kind: 'declined', code: error.code ?? 'card_error', reason: error.message };
  }
  if (error instanceof Stripe.errors.StripeInvalidRequestError && isCustomersChoice(error)) {
    return { kind: 'declined', code: error.code ?? error.rawType ?? error.type, reason: error.message };
  }
  if (
    error instanceof Stripe.errors.StripeInvalidRequestError ||
    error instanceof Stripe.errors.StripeIdempotencyError ||
    error instanceof Stripe.errors.StripeAuthenticationError ||
    error instanceof Stripe.errors.StripePermissionError
  ) {
    const param = error.param ? ` (param ${error.param})` : '';
    return { kind: 'rejected', code: error.code ?? error.rawType ?? error.type, reason: `${error.message}${param}` };
  }
  return { kind: 'retry', reason: (error as Error)?.message ?? String(error) };
}

/**
 * A connection refused when it was opened carried nothing. The SDK tries a closed connection once
 * more (it says so in the message), and that first try may have reached the provider.
 */
function neverSent(error: unknown): boolean {
  if (!(error instanceof Stripe.errors.StripeConnectionError)) return false;
  const { code } = (error.detail ?? {}) as { code?: unknown };
  return code === 'ECONNREFUSED' && !/retried/.test(error.message);
}

/**
 * The payment method is the one parameter of a charge the customer chooses (the order carries it
 * through): a refusal that names it, or a code about payment methods, is about their choice.
 */
function isCustomersChoice(error: InstanceType<typeof Stripe.errors.StripeInvalidRequestError>): boolean {
  const code = error.code ?? '';
  return (
    error.param === 'payment_method' ||
    code.startsWith('payment_method_') ||
    code === 'payment_intent_incompatible_payment_method'
  );
}

/** One call's answer, with what the console shows of it: the provider's object and whether it replayed an earlier answer. */
export interface ProviderCall {
  readonly result: ProviderResult;
  readonly objectId?: string;
  readonly replayed: boolean;
}

type Headers = Record<string, string | undefined> | undefined;
const replayed = (headers: Headers) => headers?.['idempotent-replayed'] === 'true';
const failedCall = (error: unknown): ProviderCall => ({
  result: classifyProviderError(error),
  replayed: replayed((error as { headers?: Headers }).headers),
});

/** The charge an attempt stands for, confirmed at once, sent with `idempotencyKey`. */
export async function createCharge(
  stripe: Stripe,
  attempt: { id: string; orderId: string; amountCents: number; currency: string; paymentMethod: string },
  idempotencyKey: string,
): Promise<ProviderCall> {
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
      { idempotencyKey },
    );
    return { result: resultOf(intent), objectId: intent.id, replayed: replayed(intent.lastResponse?.headers) };
  } catch (error) {
    return failedCall(error);
  }
}

/** The refund of a captured payment, sent with `idempotencyKey`. */
export async function createRefund(
  stripe: Stripe,
  payment: { paymentIntentId: string; orderId: string },
  idempotencyKey: string,
): Promise<ProviderCall> {
  try {
    const refund = await stripe.refunds.create(
      { payment_intent: payment.paymentIntentId, metadata: { order_id: payment.orderId } },
      { idempotencyKey },
    );
    return {
      result: { kind: 'succeeded', id: refund.id },
      objectId: refund.id,
      replayed: replayed(refund.lastResponse?.headers),
    };
  } catch (error) {
    return failedCall(error);
  }
}

/** A payment still processing at the provider (a bank debit), read by its id: it is never created again. */
export async function readCharge(stripe: Stripe, paymentIntentId: string): Promise<ProviderResult> {
  try {
    return resultOf(await stripe.paymentIntents.retrieve(paymentIntentId));
  } catch (error) {
    return classifyProviderError(error);
  }
}

/** What the provider holds for an attempt, found by the attempt id in its metadata (throws when it cannot ask). */
export async function searchCharges(stripe: Stripe, attemptId: string): Promise<ProviderResult[]> {
  const found = await stripe.paymentIntents.search({ query: `metadata['payment_attempt_id']:'${attemptId}'` });
  return found.data.map(resultOf);
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
