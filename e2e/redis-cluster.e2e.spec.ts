/**
 * The system on a Redis Cluster of the test's own — three masters, each with a replica, from
 * the machine's redis-server — with every message published twice; then the master holding a
 * busy queue SIGKILLed mid-burst, its replica promoted by the cluster itself, again and again.
 * Nothing may be lost, doubled or stuck, and nobody may step in: the killed node comes back as
 * an orchestrator would restart it, and rejoins as a replica.
 */
import { randomInt } from 'node:crypto';
import { placeOrder, waitForStatus, type RunningSystem } from '@idem/native-run';
import { startRedisCluster, waitFor, type RedisCluster } from '@idem/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkSystem, startIsolatedSystem } from './support.js';

let cluster: RedisCluster;
let system: RunningSystem;

beforeAll(async () => {
  cluster = await startRedisCluster({ firstPort: randomInt(31_100, 31_190), nodeTimeoutMs: 2_000 });
  system = await startIsolatedSystem({
    redisUrl: cluster.url,
    env: { IDEM_FAULTS_ENABLED: '1', IDEM_FAULTS: 'publish-twice' },
  });
}, 300_000);
afterAll(async () => {
  await system?.stop();
  await cluster?.stop();
}, 120_000);

const burst = (count: number) =>
  Promise.all(Array.from({ length: count }, () => placeOrder(system.urls, [{ sku: 'keyboard', quantity: 1 }])));
const allPaid = async (orders: { orderId: string }[]) =>
  (await Promise.all(orders.map((o) => waitForStatus(system.urls, o.orderId, new Set(['PAID']), 120_000)))).map(
    (o) => o.status,
  );
const clean = async () => {
  const report = await waitFor(
    async () => {
      const checked = await checkSystem(system, { stuckAfterMs: 20_000 });
      return checked.ok && checked;
    },
    { timeoutMs: 120_000, what: 'a clean checker report' },
  );
  return report.findings.filter((f) => f.check !== 'crash_window_send');
};

describe('on a Redis Cluster', () => {
  it('takes a burst of orders with every message published twice: every effect once, the queues on every master', async () => {
    const orders = await burst(20);
    expect(new Set(await allPaid(orders))).toEqual(new Set(['PAID']));
    expect(await clean()).toEqual([]);
    const perMaster = await cluster.keysPerMaster(`${system.queuePrefix}:*`);
    expect(Object.keys(perMaster)).toHaveLength(3);
    for (const [port, keys] of Object.entries(perMaster)) expect(keys, `master ${port}`).toBeGreaterThan(0);
  }, 300_000);

  it('loses nothing when the master of a busy queue dies mid-burst and its replica takes over, three times', async () => {
    const busyQueue = `${system.queuePrefix}:{inventory.order-placed.v1}:id`;
    for (let round = 1; round <= 3; round++) {
      const { master } = await cluster.roleOf(busyQueue);
      const orders = burst(15);
      // Mid-burst, at a moment that differs from round to round.
      await new Promise((resolve) => setTimeout(resolve, randomInt(100, 600)));
      await cluster.kill(master);
      const promoted = async () => {
        const now = await cluster.roleOf(busyQueue).catch(() => undefined);
        return now !== undefined && now.master.port !== master.port;
      };
      await waitFor(promoted, {
        timeoutMs: 30_000,
        what: `round ${round}: a replica promoted in place of ${master.port}`,
      });
      await cluster.restart(master); // it rejoins as the new master's replica
      expect(new Set(await allPaid(await orders)), `round ${round}`).toEqual(new Set(['PAID']));
      expect(await clean(), `round ${round}`).toEqual([]);
    }
  }, 600_000);
});
