import Stripe from 'stripe';

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
  | { readonly kind: 'retry'; readonly reason: string };

/**
 * Sorts a provider error:
 * - a card error is the customer's final answer (`declined`);
 * - a request the provider refuses as invalid, or a key it does not accept, is an integration
 *   fault (`rejected`): the same request would be refused again, and the customer's card was
 *   never judged, so an operator must look (it is never reported as a decline);
 * - a lost connection, 409, 429 or 5xx (and anything else) is retried later with the same key.
 */
export function classifyProviderError(error: unknown): ProviderResult {
  if (error instanceof Stripe.errors.StripeCardError) {
    return { kind: 'declined', code: error.code ?? 'card_error', reason: error.message };
  }
  if (
    error instanceof Stripe.errors.StripeInvalidRequestError ||
    error instanceof Stripe.errors.StripeIdempotencyError ||
    error instanceof Stripe.errors.StripeAuthenticationError ||
    error instanceof Stripe.errors.StripePermissionError
  ) {
    if (error.statusCode !== 409) {
      const param = error.param ? ` (param ${error.param})` : '';
      return { kind: 'rejected', code: error.code ?? error.type, reason: `${error.message}${param}` };
    }
  }
  return { kind: 'retry', reason: (error as Error)?.message ?? String(error) };
}
