import Stripe from 'stripe';
import { describe, expect, it } from 'vitest';
import { classifyProviderError } from './stripe.js';

const invalid = (raw: { message: string; code?: string; param?: string; statusCode?: number }) =>
  new Stripe.errors.StripeInvalidRequestError({ type: 'invalid_request_error', statusCode: 400, ...raw });

describe('classifyProviderError', () => {
  it('declines for what the customer chose: a payment method that does not exist, is unusable, or does not take the currency', () => {
    for (const error of [
      invalid({ message: "No such PaymentMethod: 'pm_x'", code: 'resource_missing', param: 'payment_method' }),
      invalid({ message: 'This PaymentMethod was previously used…', code: 'payment_method_unexpected_state' }),
      invalid({
        message: 'The currency is not supported by this payment method',
        code: 'payment_intent_incompatible_payment_method',
      }),
    ]) {
      expect(classifyProviderError(error)).toMatchObject({ kind: 'declined', reason: error.message });
    }
  });

  it('parks what idem builds or holds: another parameter, a key the provider does not accept', () => {
    expect(classifyProviderError(invalid({ message: 'Invalid currency: xx.', param: 'currency' }))).toMatchObject({
      kind: 'rejected',
      reason: 'Invalid currency: xx. (param currency)',
    });
    const key = new Stripe.errors.StripeAuthenticationError({
      type: 'authentication_error',
      message: 'Invalid API Key',
    });
    expect(classifyProviderError(key)).toMatchObject({ kind: 'rejected' });
  });

  it('retries a conflict, even one about the payment method', () => {
    const conflict = invalid({ message: 'in use', param: 'payment_method', statusCode: 409 });
    expect(classifyProviderError(conflict)).toMatchObject({ kind: 'retry' });
  });
});
