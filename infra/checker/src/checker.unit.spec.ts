import { createServer } from 'node:http';
import { describe, expect, it } from 'vitest';
import { KeyInTheClearError, listMail, listStripe } from './checker.js';

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

describe('the checker reading the mail server', () => {
  /** A mail API that answers only `expected` in Authorization, and records what it was sent. */
  async function mailApi(expected: string) {
    const sent: (string | undefined)[] = [];
    const server = createServer((req, res) => {
      sent.push(req.headers.authorization);
      if (req.headers.authorization !== expected) return void res.writeHead(401).end();
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ total: 1, messages: [{ MessageID: 'a@idem' }] }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { port: (server.address() as { port: number }).port, sent, close: () => server.close() };
  }

  it("logs in with the credentials of its URL (compose's Mailpit), and never sends the operator token there", async () => {
    const api = await mailApi(`Basic ${Buffer.from('idem:s3cret/+').toString('base64')}`);
    try {
      const ids = await listMail(`http://idem:${encodeURIComponent('s3cret/+')}@127.0.0.1:${api.port}`, 'operator');
      expect(ids).toEqual(['a@idem']);
      expect(api.sent.join(' ')).not.toContain('operator');
    } finally {
      api.close();
    }
  });

  it('sends the operator token to a mail sink whose URL has no credentials (the native sink)', async () => {
    const api = await mailApi('Bearer operator');
    try {
      expect(await listMail(`http://127.0.0.1:${api.port}`, 'operator')).toEqual(['a@idem']);
    } finally {
      api.close();
    }
  });
});
