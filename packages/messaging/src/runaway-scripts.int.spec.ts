import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { exited, waitFor } from '@idem/testkit';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asRedisUser } from './redis.js';
import { redisUserOf, setRedisUser } from './redis-users.js';
import { killRunawayScripts } from './runaway-scripts.js';

/**
 * A service user's endless script, on a Redis of this test's own (a busy loop would hold the
 * machine's Redis, and every test on it): with the threshold compose and Kubernetes set, another
 * service's process kills it within about a second, and Redis answers again.
 */
const port = randomInt(32_200, 32_300); // above the systems' ports, below the ephemeral range
const url = `redis://127.0.0.1:${port}`;
const password = randomBytes(16).toString('hex');
const userOf = (service: string) =>
  redisUserOf(`idem-${service}`, {
    prefix: 'idem',
    service,
    redisUrl: url,
    consumes: [],
    publishes: [],
    subscribes: [],
  });
let server: ChildProcess;

/** A client that is connected (and its ready check done) before any script runs, and never reconnects. */
async function connected(redisUrl: string): Promise<Redis> {
  const client = new Redis(redisUrl, { maxRetriesPerRequest: 1, retryStrategy: () => null });
  client.on('error', () => {}); // BUSY, while a script runs
  await client.ping();
  return client;
}

beforeAll(async () => {
  server = spawn(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--busy-reply-threshold',
      '1000',
    ],
    { stdio: 'ignore' },
  );
  const admin = new Redis(url, { maxRetriesPerRequest: 1 });
  admin.on('error', () => {}); // refused until the server is up
  try {
    await waitFor(async () => (await admin.ping().catch(() => '')) === 'PONG', { what: 'the Redis server' });
    for (const service of ['inventory', 'payments']) await setRedisUser(admin, userOf(service), password);
  } finally {
    admin.disconnect();
  }
});
// Whatever a test left running on it (a script that never ends), the server goes with the file.
afterAll(async () => {
  server.kill('SIGKILL');
  await exited(server);
});

describe('a script that never ends', () => {
  it("is killed by any idem process that meets BUSY, and Redis answers again: a service user's EVAL cannot hold it", async () => {
    const rogue = await connected(asRedisUser(url, 'idem-inventory', password));
    const payments = await connected(asRedisUser(url, 'idem-payments', password));
    const outcomes: string[] = [];
    const stop = killRunawayScripts(payments, { everyMs: 200, onBusy: (outcome) => outcomes.push(outcome) });
    try {
      const started = Date.now();
      const loop = rogue.eval('while true do end', 0).then(
        () => 'returned',
        (error: Error) => error.message,
      );
      expect(await loop).toMatch(/killed/i);
      expect(Date.now() - started).toBeLessThan(5_000); // the threshold (1 s) and a ping or two
      expect(outcomes).toEqual(['killed']);
      expect(await payments.set('idem:rate-limit:payments:probe', '1')).toBe('OK');
    } finally {
      stop();
      rogue.disconnect();
      payments.disconnect();
    }
  });

  it('reports one that wrote before it looped, which only an operator can end (SHUTDOWN NOSAVE)', async () => {
    const rogue = await connected(asRedisUser(url, 'idem-inventory', password));
    const payments = await connected(asRedisUser(url, 'idem-payments', password));
    const operator = await connected(url);
    const outcomes: string[] = [];
    const stop = killRunawayScripts(payments, { everyMs: 200, onBusy: (outcome) => outcomes.push(outcome) });
    try {
      const loop = rogue
        .eval("redis.call('set', KEYS[1], '1') while true do end", 1, 'idem:rate-limit:inventory:probe')
        .catch((error: Error) => error.message);
      await waitFor(() => outcomes.includes('unkillable'), { what: 'the refused SCRIPT KILL' });
      // The last test on this server: the operator's way out, which ends it.
      await operator.call('SHUTDOWN', 'NOSAVE').catch(() => {});
      await exited(server);
      expect(await loop).not.toBe('OK');
    } finally {
      stop();
      for (const client of [rogue, payments, operator]) client.disconnect();
    }
  });
});
