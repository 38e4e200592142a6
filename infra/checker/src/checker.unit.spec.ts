import { createServer } from 'node:http';
import { describe, expect, it } from 'vitest';
import { listStripe, LiveKeyInTheClearError } from './checker.js';

describe('the checker reading the payment provider', () => {
  it('refuses to send a live key over plain HTTP, before any request, as payments refuses it', async () => {
    let requests = 0;
    const server = createServer((_req, res) => {
      requests += 1;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ data: [], has_more: false }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const apiBase = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    try {
      for (const apiKey of ['sk_live_0123456789abcdef', 'rk_live_0123456789abcdef'])
        await expect(listStripe({ apiBase, apiKey }, '/v1/payment_intents')).rejects.toThrow(LiveKeyInTheClearError);
      expect(requests).toBe(0);
      // A test key (or the simulator's) may go to a simulator over HTTP.
      expect(await listStripe({ apiBase, apiKey: 'sk_test_idem_simulator' }, '/v1/payment_intents')).toEqual([]);
      expect(requests).toBe(1);
    } finally {
      server.close();
    }
  });
});
