import { SIMULATOR_API_KEY as SIMULATORS_OWN_KEY } from '@idem/stripe-sim';
import { describe, expect, it } from 'vitest';
import { loadConfig, SIMULATOR_API_KEY } from './config.js';

describe('payments configuration: choosing the payment provider', () => {
  it('uses the simulator by default, with the only key the simulator accepts', () => {
    expect(loadConfig({})).toMatchObject({
      PAYMENT_PROVIDER: 'simulator',
      STRIPE_API_BASE: 'http://127.0.0.1:12111',
      STRIPE_API_KEY: SIMULATOR_API_KEY,
    });
    expect(SIMULATOR_API_KEY).toBe(SIMULATORS_OWN_KEY);
  });

  it('refuses a real key with the simulator instead of sending it there', () => {
    expect(() => loadConfig({ STRIPE_API_KEY: 'sk_test_51AbcDef' })).toThrow(
      /STRIPE_API_KEY: a real key is set while PAYMENT_PROVIDER is simulator/,
    );
  });

  it('talks to api.stripe.com with PAYMENT_PROVIDER=stripe and a secret key', () => {
    const config = loadConfig({ PAYMENT_PROVIDER: 'stripe', STRIPE_API_KEY: 'sk_test_51AbcDef' });
    expect(config).toMatchObject({ PAYMENT_PROVIDER: 'stripe', STRIPE_API_KEY: 'sk_test_51AbcDef' });
    expect(config.STRIPE_API_BASE).toBeUndefined();
  });

  it('refuses Stripe without a key, with the simulator placeholder, or with something that is no secret key', () => {
    expect(() => loadConfig({ PAYMENT_PROVIDER: 'stripe' })).toThrow(/STRIPE_API_KEY: PAYMENT_PROVIDER=stripe needs/);
    expect(() => loadConfig({ PAYMENT_PROVIDER: 'stripe', STRIPE_API_KEY: SIMULATOR_API_KEY })).toThrow(
      /STRIPE_API_KEY: not a Stripe secret key/,
    );
    expect(() => loadConfig({ PAYMENT_PROVIDER: 'stripe', STRIPE_API_KEY: 'pk_test_51Abc' })).toThrow(
      /not a Stripe secret key/,
    );
  });

  it('refuses to send a real key to a base that is not https', () => {
    expect(() =>
      loadConfig({
        PAYMENT_PROVIDER: 'stripe',
        STRIPE_API_KEY: 'sk_live_51AbcDef',
        STRIPE_API_BASE: 'http://stripe-sim:12111',
      }),
    ).toThrow(/STRIPE_API_BASE: a real Stripe key is sent only over https, not to http:\/\/stripe-sim:12111/);
    expect(
      loadConfig({
        PAYMENT_PROVIDER: 'stripe',
        STRIPE_API_KEY: 'rk_test_51Abc',
        STRIPE_API_BASE: 'https://proxy.example',
      }).STRIPE_API_BASE,
    ).toBe('https://proxy.example');
  });

  it('never shows the key in its error', () => {
    expect(() => loadConfig({ STRIPE_API_KEY: 'sk_live_51SecretValue' })).toThrow(
      expect.objectContaining({ message: expect.not.stringContaining('SecretValue') }),
    );
  });

  it('refuses a worker lease that a provider call could outlast', () => {
    expect(() => loadConfig({ PAYMENT_WORKER_LEASE_MS: '30000', STRIPE_TIMEOUT_MS: '20000' })).toThrow(
      /PAYMENT_WORKER_LEASE_MS: must be longer than two Stripe requests \(2 × STRIPE_TIMEOUT_MS = 40000 ms\)/,
    );
    expect(loadConfig({ PAYMENT_WORKER_LEASE_MS: '3000', STRIPE_TIMEOUT_MS: '1000' }).STRIPE_TIMEOUT_MS).toBe(1000);
  });
});
