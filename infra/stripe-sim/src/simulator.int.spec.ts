import type { Server } from 'node:http';
import Stripe from 'stripe';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createStripeSimulator, SIMULATOR_API_KEY } from './simulator.js';

const simulator = createStripeSimulator({ latencyMs: 50 });
let server: Server;
let stripe: Stripe;

beforeAll(async () => {
  server = await new Promise<Server>((resolve) => {
    const s = simulator.app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const { port } = server.address() as { port: number };
  stripe = new Stripe(SIMULATOR_API_KEY, { host: '127.0.0.1', port, protocol: 'http', maxNetworkRetries: 0 });
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
beforeEach(() => {
  simulator.reset();
  simulator.setFaults({ errorAfterCreate: 0, dropAfterCreate: 0 });
});

const charge = (key: string, paymentMethod = 'pm_card_visa', amount = 1500) =>
  stripe.paymentIntents.create(
    {
      amount,
      currency: 'eur',
      payment_method: paymentMethod,
      confirm: true,
      automatic_payment_methods: { enabled: true, allow_redirects: 'never' },
      metadata: { order_id: 'o-1' },
    },
    { idempotencyKey: key },
  );

describe('Stripe simulator, through the official SDK', () => {
  it('confirms a PaymentIntent with pm_card_visa', async () => {
    const intent = await charge('k1');
    expect(intent).toMatchObject({
      object: 'payment_intent',
      status: 'succeeded',
      amount: 1500,
      metadata: { order_id: 'o-1' },
    });
    expect(await stripe.paymentIntents.retrieve(intent.id)).toEqual(intent);
  });

  it('replays the stored result for the same key and parameters, creating nothing new', async () => {
    const first = await charge('k2');
    const again = await charge('k2');
    expect(again.id).toBe(first.id);
    expect(again.lastResponse.headers['idempotent-replayed']).toBe('true');
    expect(simulator.paymentIntents()).toHaveLength(1);
  });

  it('refuses the same key with other parameters with an idempotency error', async () => {
    await charge('k3');
    await expect(charge('k3', 'pm_card_visa', 999)).rejects.toBeInstanceOf(Stripe.errors.StripeIdempotencyError);
  });

  it('answers 409 while a request with the same key is still executing', async () => {
    const [first, second] = await Promise.allSettled([
      charge('k4'),
      new Promise((r) => setTimeout(r, 10)).then(() => charge('k4')),
    ]);
    expect(first.status).toBe('fulfilled');
    expect(second).toMatchObject({ status: 'rejected', reason: { statusCode: 409, code: 'idempotency_key_in_use' } });
  });

  it('declines pm_card_chargeDeclined with card_declined, and replays the decline', async () => {
    const declined = charge('k5', 'pm_card_chargeDeclined');
    await expect(declined).rejects.toBeInstanceOf(Stripe.errors.StripeCardError);
    await expect(declined).rejects.toMatchObject({ code: 'card_declined', decline_code: 'generic_decline' });
    await expect(charge('k5', 'pm_card_chargeDeclined')).rejects.toMatchObject({ code: 'card_declined' });
    expect(simulator.paymentIntents()).toHaveLength(1);
  });

  it('can fail the answer after creating the charge; a retry with the same key gets the charge', async () => {
    simulator.setFaults({ errorAfterCreate: 1 });
    await expect(charge('k6')).rejects.toBeInstanceOf(Stripe.errors.StripeAPIError);
    simulator.setFaults({ errorAfterCreate: 0 });
    const intent = await charge('k6');
    expect(intent.status).toBe('succeeded');
    expect(simulator.paymentIntents()).toHaveLength(1);
  });

  it('can drop the connection after creating the charge; the SDK retries under the same key and gets that charge', async () => {
    simulator.setFaults({ dropAfterCreate: 1 });
    // stripe-node retries a closed connection once, whatever maxNetworkRetries says; the
    // replay of the stored result is not subject to faults.
    const intent = await charge('k7');
    expect(simulator.paymentIntents().map((p) => p.id)).toEqual([intent.id]);
  });

  it('lists PaymentIntents newest first, page by page', async () => {
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push((await charge(`list-${i}`)).id);
    const page = await stripe.paymentIntents.list({ limit: 3 });
    expect(page.data.map((p) => p.id)).toEqual(ids.slice(2).reverse());
    expect(page.has_more).toBe(true);
    const all = [];
    for await (const intent of stripe.paymentIntents.list({ limit: 2 })) all.push(intent.id);
    expect(all).toEqual([...ids].reverse());
  });

  it('refunds a captured PaymentIntent once per key, and refuses refunding more than was charged', async () => {
    const intent = await charge('k8');
    const refund = await stripe.refunds.create({ payment_intent: intent.id }, { idempotencyKey: 'r1' });
    expect(refund).toMatchObject({ object: 'refund', amount: 1500, status: 'succeeded', payment_intent: intent.id });
    expect((await stripe.refunds.create({ payment_intent: intent.id }, { idempotencyKey: 'r1' })).id).toBe(refund.id);
    await expect(stripe.refunds.create({ payment_intent: intent.id }, { idempotencyKey: 'r2' })).rejects.toMatchObject({
      code: 'charge_already_refunded',
    });
    expect(simulator.refunds()).toHaveLength(1);
  });

  it('refuses a request without an API key', async () => {
    const { port } = server.address() as { port: number };
    const res = await fetch(`http://127.0.0.1:${port}/v1/payment_intents`);
    expect(res.status).toBe(401);
  });

  it('refuses any key but its own placeholder, so a real key never reaches it unnoticed', async () => {
    const { port } = server.address() as { port: number };
    const real = new Stripe('sk_test_51RealLookingKey', {
      host: '127.0.0.1',
      port,
      protocol: 'http',
      maxNetworkRetries: 0,
    });
    const refused = real.paymentIntents.list();
    await expect(refused).rejects.toBeInstanceOf(Stripe.errors.StripeAuthenticationError);
    await expect(refused).rejects.toThrow(/accepts only its placeholder key/);
  });

  it('refuses to confirm without a return_url, payment_method_types or redirects turned off, as Stripe does', async () => {
    const confirm = (extra: Record<string, unknown>, key: string) =>
      stripe.paymentIntents.create(
        { amount: 100, currency: 'eur', payment_method: 'pm_card_visa', confirm: true, ...extra },
        { idempotencyKey: key },
      );
    const refused = confirm({}, 'r1');
    await expect(refused).rejects.toBeInstanceOf(Stripe.errors.StripeInvalidRequestError);
    await expect(refused).rejects.toMatchObject({ statusCode: 400, param: 'return_url' });
    await expect(confirm({ automatic_payment_methods: { enabled: true } }, 'r2')).rejects.toMatchObject({
      param: 'return_url',
    });
    expect(simulator.paymentIntents()).toHaveLength(0);
    await expect(confirm({ payment_method_types: ['card'] }, 'r3')).resolves.toMatchObject({ status: 'succeeded' });
    await expect(confirm({ return_url: 'https://shop.example/return' }, 'r4')).resolves.toMatchObject({
      status: 'succeeded',
    });
    // Nothing was stored for the refused request: the same key with the right parameters works.
    await expect(
      confirm({ automatic_payment_methods: { enabled: true, allow_redirects: 'never' } }, 'r1'),
    ).resolves.toMatchObject({ status: 'succeeded' });
  });

  it("finds PaymentIntents by metadata, as Stripe's search does, and can forget idempotency keys", async () => {
    const first = await charge('k-search');
    const found = await stripe.paymentIntents.search({ query: "metadata['order_id']:'o-1'" });
    expect(found.data.map((p) => p.id)).toEqual([first.id]);
    simulator.expireIdempotencyKeys(); // as Stripe does after about 24 hours
    const second = await charge('k-search');
    expect(second.id).not.toBe(first.id); // the same key charges again: why idem never sends an old key
  });
});

describe('Stripe simulator, as curl and a browser reach it', () => {
  const base = () => `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  const basic = (user: string, password = '') => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

  it('takes the key as HTTP Basic user name with an empty password (curl -u key:), as Stripe does, and refuses a foreign key either way', async () => {
    const list = (authorization: string) => fetch(`${base()}/v1/payment_intents`, { headers: { authorization } });
    expect((await list(basic(SIMULATOR_API_KEY))).status).toBe(200);
    expect((await list(`bearer ${SIMULATOR_API_KEY}`)).status).toBe(200); // the scheme in any case
    expect((await list(basic('sk_test_someone_elses_key'))).status).toBe(401);
    expect((await list(basic(SIMULATOR_API_KEY, 'a-password'))).status).toBe(401);
    expect((await list('Bearer sk_test_someone_elses_key')).status).toBe(401);
  });

  it('refuses its control routes to another web page, and every route to a foreign Host', async () => {
    const faults = (headers: Record<string, string>) =>
      fetch(`${base()}/_sim/faults`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ errorAfterCreate: 1 }),
      });
    expect((await faults({ origin: 'http://evil.example' })).status).toBe(403);
    expect((await faults({ 'sec-fetch-site': 'cross-site' })).status).toBe(403);
    expect(await charge('k-guard')).toMatchObject({ status: 'succeeded' }); // the fault was not switched on
    const { request } = await import('node:http');
    const status = await new Promise<number>((resolve, reject) =>
      request(
        {
          host: '127.0.0.1',
          port: (server.address() as { port: number }).port,
          path: '/v1/payment_intents',
          headers: { host: 'evil.example', authorization: `Bearer ${SIMULATOR_API_KEY}` },
        },
        (res) => resolve(res.statusCode!),
      )
        .on('error', reject)
        .end(),
    );
    expect(status).toBe(403);
  });
});

describe('the simulator beyond loopback', () => {
  it('will not serve a network with its public placeholder key', () => {
    expect(() => createStripeSimulator({ host: '0.0.0.0' })).toThrow(/STRIPE_SIM_API_KEY/);
  });

  it('admits only its own key there, to its API and its controls alike', async () => {
    const key = 'sk_test_idem_simulator_0123456789abcdef';
    const networked = createStripeSimulator({ host: '0.0.0.0', apiKey: key });
    const listening = await new Promise<Server>((resolve) => {
      const s = networked.app.listen(0, '0.0.0.0', () => resolve(s));
    });
    const at = (path: string) => `http://127.0.0.1:${(listening.address() as { port: number }).port}${path}`;
    try {
      const list = (authorization?: string) =>
        fetch(at('/v1/payment_intents'), { headers: authorization ? { authorization } : {} });
      expect((await list()).status).toBe(401);
      expect((await list(`Bearer ${SIMULATOR_API_KEY}`)).status).toBe(401);
      expect((await list(`Bearer ${key}`)).status).toBe(200);
      const faults = (authorization?: string) =>
        fetch(at('/_sim/faults'), {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(authorization ? { authorization } : {}) },
          body: JSON.stringify({ errorAfterCreate: 0 }),
        });
      expect((await faults()).status).toBe(401);
      expect((await faults(`Bearer ${key}`)).status).toBeLessThan(300);
    } finally {
      await new Promise<void>((resolve) => listening.close(() => resolve()));
    }
  });
});
