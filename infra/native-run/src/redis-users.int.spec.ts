import { randomInt } from 'node:crypto';
import { SERVICE_NAMES } from '@idem/shop';
import { endlessScript, startRedisServer, type RedisServer } from '@idem/testkit';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { provisionRedisUsers, watchRunawayScripts } from './redis-users.js';

/**
 * The native run's watch for a script that never ends, on a Redis of this test's own (a busy
 * loop would hold the machine's): the users `pnpm start` makes, and the watch its own process
 * runs as the watcher's user. The services run none, and their users may not kill a script.
 */
let server: RedisServer;

beforeAll(async () => {
  // Above the systems' ports, below the ephemeral range.
  server = await startRedisServer({ port: randomInt(32_700, 32_800), args: ['--busy-reply-threshold', '1000'] });
});
afterAll(() => server.stop());

describe('the native run', () => {
  it("kills a service's endless script from the process of `pnpm start`, as the watcher's user", async () => {
    const users = await provisionRedisUsers(server.url, 'idem', SERVICE_NAMES);
    const lines: string[] = [];
    const stop = watchRunawayScripts(users.as('script-watcher', server.url), (line) => lines.push(line));
    const inventory = new Redis(users.as('inventory', server.url), { maxRetriesPerRequest: 1 });
    try {
      await expect(inventory.call('SCRIPT', 'KILL')).rejects.toThrow(/NOPERM/);
      const { ended, afterMs } = await endlessScript(inventory);
      expect(ended).toMatch(/killed/i);
      expect(afterMs).toBeLessThan(5_000); // the threshold (1 s) and a ping or two
      expect(lines).toEqual(['a Lua script held Redis past its busy-reply-threshold: killed']);
    } finally {
      stop();
      inventory.disconnect();
      await users.remove();
    }
  });
});
