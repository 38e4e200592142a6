import { createServer } from 'node:http';
import { describe, expect, it } from 'vitest';
import { KeyInTheClearError, listStripe } from './checker.js';

describe('the checker reading the payment provider', () => {
  it("refuses to send any key but the simulator's over plain HTTP, before any request, as payments refuses it", async () => {
    let requests = 0;
    const server = createServer((_req, res) => {
      requests += 1;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ data: [], has_more: false }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const apiBase = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    try {
      // A real test key reads a real account's payments and refunds: it is a secret too.
      for (const apiKey of [
        'sk_live_0123456789abcdef',
        'rk_live_0123456789abcdef',
        'sk_test_51AbCdEf0123456789abcdef',
        'rk_test_51AbCdEf0123456789abcdef',
        'a-key-of-no-known-shape',
      ])
        await expect(listStripe({ apiBase, apiKey }, '/v1/payment_intents'), apiKey).rejects.toThrow(
          KeyInTheClearError,
        );
      expect(requests).toBe(0);
      // The simulator's keys (its placeholder, and the key of its own compose gives it) go to it over HTTP.
      for (const apiKey of ['sk_test_idem_simulator', `sk_test_idem_simulator_${'0f'.repeat(24)}`])
        expect(await listStripe({ apiBase, apiKey }, '/v1/payment_intents'), apiKey).toEqual([]);
      expect(requests).toBe(2);
    } finally {
      server.close();
    }
  });

  it('sends a real key over https', async () => {
    // Nothing listens there: the request is made, and fails as a request, not as a refusal.
    const refused = await listStripe(
      { apiBase: 'https://127.0.0.1:1', apiKey: 'sk_test_51AbCdEf0123456789abcdef' },
      '/v1/payment_intents',
    ).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(Error);
    expect(refused).not.toBeInstanceOf(KeyInTheClearError);
  });
});
