import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:net';
import { closedPort, listenOnLoopback } from '@idem/testkit';
import { afterEach, describe, expect, it } from 'vitest';
import { createCharge, createStripeClient, type ProviderResult } from './stripe.js';

/**
 * Every error below is made by the real Stripe SDK from what a real socket on this machine did:
 * an HTTP server answering as Stripe answers (status, `error` body), or a TCP server that refuses,
 * hangs up or never answers. Nothing is built by hand, so a change of SDK that classes an answer
 * differently (a 409 is a StripeAPIError, not an invalid request) shows here.
 */
const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

/** Listens on a loopback port, closed after the test. */
function listening(server: Server): Promise<number> {
  servers.push(server);
  return listenOnLoopback(server);
}

/** An HTTP server that answers every request with `status` and Stripe's error body. */
const answering = (status: number, error: Record<string, string>, headers: Record<string, string> = {}) =>
  listening(
    createHttpServer((req: IncomingMessage, res: ServerResponse) => {
      req.resume().on('end', () => {
        res.writeHead(status, { 'content-type': 'application/json', ...headers });
        res.end(JSON.stringify({ error }));
      });
    }),
  );

/** A TCP server that reads each request and then hangs up, or says nothing at all. */
const afterTheRequest = (then: 'hang up' | 'silence') =>
  listening(
    createServer((socket) => {
      socket.on('error', () => {});
      socket.on('data', (chunk: Buffer) => {
        if (then === 'hang up' && chunk.includes('\r\n\r\n')) socket.destroy();
      });
    }),
  );

/** What the payment worker makes of one charge sent to `port` with the real SDK. */
async function chargeAt(port: number): Promise<ProviderResult> {
  const stripe = createStripeClient({ apiKey: 'sk_test_local', apiBase: `http://127.0.0.1:${port}`, timeoutMs: 500 });
  const attempt = { id: 'pa_1', orderId: 'order-1', amountCents: 500, currency: 'eur', paymentMethod: 'pm_card_visa' };
  return (await createCharge(stripe, attempt, 'key-1')).result;
}

describe('a charge the provider refused, as the Stripe SDK reports it', () => {
  it('declines for what the customer chose: their card, or a payment method that does not exist, is unusable, or does not take the currency', async () => {
    for (const [status, error] of [
      [402, { type: 'card_error', code: 'card_declined', message: 'Your card was declined.' }],
      [
        400,
        {
          type: 'invalid_request_error',
          code: 'resource_missing',
          param: 'payment_method',
          message: 'No such PaymentMethod',
        },
      ],
      [400, { type: 'invalid_request_error', code: 'payment_method_unexpected_state', message: 'previously used' }],
      [
        400,
        { type: 'invalid_request_error', code: 'payment_intent_incompatible_payment_method', message: 'not supported' },
      ],
    ] as const)
      expect(await chargeAt(await answering(status, error)), error.code).toMatchObject({
        kind: 'declined',
        reason: error.message,
      });
  });

  it('parks what idem builds or holds: another parameter, a key the provider refuses, a key reused for another request', async () => {
    expect(
      await chargeAt(
        await answering(400, { type: 'invalid_request_error', param: 'currency', message: 'Invalid currency: xx.' }),
      ),
    ).toMatchObject({ kind: 'rejected', reason: 'Invalid currency: xx. (param currency)' });
    expect(
      await chargeAt(await answering(401, { type: 'authentication_error', message: 'Invalid API Key' })),
    ).toMatchObject({
      kind: 'rejected',
    });
    // The same Idempotency-Key with other parameters: the same request would be refused again.
    expect(
      await chargeAt(
        await answering(400, {
          type: 'idempotency_error',
          message: 'Keys for idempotent requests can only be used with the same parameters',
        }),
      ),
    ).toMatchObject({ kind: 'rejected', code: 'idempotency_error' });
  });
});

describe('a charge whose outcome is not known, as the Stripe SDK reports it', () => {
  it('retries with the same key what may have happened: a 500 (kept under the key), a conflict on the key, a timeout, a lost answer', async () => {
    const mayHaveHappened = {
      // Stripe saves a 500 under the key once the request began: the charge may exist.
      '500': await answering(500, { type: 'api_error', message: 'Something went wrong' }),
      // Another request with the key is under way (the SDK makes a 409 a StripeAPIError).
      '409': await answering(409, {
        type: 'invalid_request_error',
        code: 'idempotency_key_in_use',
        param: 'payment_method', // even one that names the customer's choice
        message: 'There is currently another in-progress request using this Idempotent Key',
      }),
      // A 429 is retried too: nothing in it says no proxy before Stripe took the request.
      '429': await answering(429, { type: 'invalid_request_error', code: 'rate_limit', message: 'Too many requests' }),
      timeout: await afterTheRequest('silence'),
      // The SDK tries a closed connection once more with the same key; the second is closed too.
      'hung up': await afterTheRequest('hang up'),
    };
    for (const [what, port] of Object.entries(mayHaveHappened))
      expect(await chargeAt(port), what).toMatchObject({ kind: 'retry' });
    expect(await chargeAt(mayHaveHappened.timeout)).toMatchObject({ reason: expect.stringMatching(/timeout/) });
    expect(await chargeAt(mayHaveHappened['hung up'])).toMatchObject({
      reason: expect.stringMatching(/retried 1 time/),
    });
  });

  it('counts a refused connection as unreached: nothing was sent', async () => {
    expect(await chargeAt(await closedPort())).toMatchObject({ kind: 'unreached' });
  });
});
