import { randomBytes, randomInt } from 'node:crypto';
import { endlessScript, exited, startRedisServer, waitFor, type RedisServer } from '@idem/testkit';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asRedisUser } from './redis.js';
import { redisUserOf, scriptWatcherRedisUser, setRedisUser } from './redis-users.js';
import { killRunawayScripts } from './runaway-scripts.js';

/**
 * A service user's endless script, on a Redis of this test's own (a busy loop would hold the
 * machine's Redis, and every test on it): with the threshold compose and Kubernetes set, the
 * watcher kills it within about a second, as its own user, and Redis answers again. No service's
 * user may kill a script or flush the server's scripts itself.
 */
const password = randomBytes(16).toString('hex');
const userOf = (service: string) =>
  redisUserOf(`idem-${service}`, {
    prefix: 'idem',
    service,
    redisUrl: url,
    consumes: [],
    publishes: [],
    subscribes: [],
    deliversTo: [],
  });
const watcher = scriptWatcherRedisUser('idem-script-watcher');
let server: RedisServer;
let url: string;

/** A client that is connected before any script runs, and never reconnects (the watcher's user may not INFO: no ready check). */
async function connected(redisUrl: string): Promise<Redis> {
  const client = new Redis(redisUrl, { maxRetriesPerRequest: 1, retryStrategy: () => null, enableReadyCheck: false });
  client.on('error', () => {}); // BUSY, while a script runs
  await client.ping();
  return client;
}

beforeAll(async () => {
  // Above the systems' ports, below the ephemeral range.
  server = await startRedisServer({ port: randomInt(32_200, 32_300), args: ['--busy-reply-threshold', '1000'] });
  url = server.url;
  const admin = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    for (const service of ['inventory', 'payments']) await setRedisUser(admin, userOf(service), password);
    await setRedisUser(admin, watcher, password);
  } finally {
    admin.disconnect();
  }
});
// Whatever a test left running on it (a script that never ends), the server goes with the file.
afterAll(() => server.stop());

describe("another's scripts", () => {
  it("are out of a service user's reach: no SCRIPT KILL, SCRIPT FLUSH or SCRIPT DEBUG, no FUNCTION; its own EVAL it may", async () => {
    const payments = await connected(asRedisUser(url, 'idem-payments', password));
    try {
      await expect(payments.call('SCRIPT', 'FLUSH')).rejects.toThrow(/NOPERM/);
      await expect(payments.call('SCRIPT', 'KILL')).rejects.toThrow(/NOPERM/);
      await expect(payments.call('SCRIPT', 'DEBUG', 'SYNC')).rejects.toThrow(/NOPERM/);
      await expect(
        payments.call('FUNCTION', 'LOAD', "#!lua name=rogue\nredis.register_function('f', function() end)"),
      ).rejects.toThrow(/NOPERM/);
      await expect(payments.call('FUNCTION', 'FLUSH')).rejects.toThrow(/NOPERM/);
      expect(await payments.eval('return 1', 0)).toBe(1);
    } finally {
      payments.disconnect();
    }
  });

  it("are the watcher's to kill, and nothing else is: no key, no SCRIPT FLUSH, no EVAL", async () => {
    const watching = await connected(asRedisUser(url, watcher.name, password));
    try {
      expect(await watching.ping()).toBe('PONG');
      await expect(watching.call('SCRIPT', 'KILL')).rejects.toThrow(/NOTBUSY/); // allowed: nothing runs
      await expect(watching.call('SCRIPT', 'FLUSH')).rejects.toThrow(/NOPERM/);
      await expect(watching.get('idem:rate-limit:payments:probe')).rejects.toThrow(/NOPERM/);
      await expect(watching.eval('return 1', 0)).rejects.toThrow(/NOPERM/);
    } finally {
      watching.disconnect();
    }
  });
});

describe('a script that never ends', () => {
  it("is killed by the watcher, as its own user, and Redis answers again: a service user's EVAL cannot hold it", async () => {
    const rogue = await connected(asRedisUser(url, 'idem-inventory', password));
    const payments = await connected(asRedisUser(url, 'idem-payments', password));
    const watching = await connected(asRedisUser(url, watcher.name, password));
    const outcomes: string[] = [];
    const stop = killRunawayScripts(watching, { everyMs: 200, onBusy: (outcome) => outcomes.push(outcome) });
    try {
      const { ended, afterMs } = await endlessScript(rogue);
      expect(ended).toMatch(/killed/i);
      expect(afterMs).toBeLessThan(5_000); // the threshold (1 s) and a ping or two
      expect(outcomes).toEqual(['killed']);
      expect(await payments.set('idem:rate-limit:payments:probe', '1')).toBe('OK');
    } finally {
      stop();
      for (const client of [rogue, payments, watching]) client.disconnect();
    }
  });

  it('reports one that wrote before it looped, which only an operator can end (SHUTDOWN NOSAVE)', async () => {
    const rogue = await connected(asRedisUser(url, 'idem-inventory', password));
    const watching = await connected(asRedisUser(url, watcher.name, password));
    const operator = await connected(url);
    const outcomes: string[] = [];
    const stop = killRunawayScripts(watching, { everyMs: 200, onBusy: (outcome) => outcomes.push(outcome) });
    try {
      const loop = rogue
        .eval("redis.call('set', KEYS[1], '1') while true do end", 1, 'idem:rate-limit:inventory:probe')
        .catch((error: Error) => error.message);
      await waitFor(() => outcomes.includes('unkillable'), { what: 'the refused SCRIPT KILL' });
      // The last test on this server: the operator's way out, which ends it.
      await operator.call('SHUTDOWN', 'NOSAVE').catch(() => {});
      await exited(server.process);
      expect(await loop).not.toBe('OK');
    } finally {
      stop();
      for (const client of [rogue, watching, operator]) client.disconnect();
    }
  });
});
