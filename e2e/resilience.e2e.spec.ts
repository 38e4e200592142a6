/**
 * The system under duress: every consumer three times over, every message published twice,
 * Redis restarted and database connections killed mid-flow. Nothing may be lost or doubled,
 * and nobody may have to step in.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SERVICES, placeOrder, waitForStatus, type RunningSystem } from '@idem/native-run';
import { exited, waitFor } from '@idem/testkit';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkSystem, startIsolatedSystem } from './support.js';

const redisPort = randomInt(32_200, 32_700); // above the systems' ports, below the ephemeral range
const redisDir = mkdtempSync(join(tmpdir(), 'idem-redis-'));
const aclFile = join(redisDir, 'users.acl');
writeFileSync(aclFile, '');
let redis: ChildProcess;
let system: RunningSystem;

/** A Redis of this test's own (append-only, fsync always), so restarting it disturbs nobody else. */
async function startRedis(): Promise<ChildProcess> {
  const child = spawn(
    'redis-server',
    [
      '--port',
      String(redisPort),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'yes',
      '--appendfsync',
      'always',
      '--dir',
      redisDir,
      // The services' users (the native run makes one per service) are saved here, and survive the restart.
      '--aclfile',
      aclFile,
    ],
    { stdio: 'ignore' },
  );
  await waitFor(async () => {
    const client = new Redis(redisPort, '127.0.0.1', {
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
    });
    client.on('error', () => {}); // refused until the server is up
    try {
      await client.connect();
      return (await client.ping()) === 'PONG';
    } catch {
      return false;
    } finally {
      client.disconnect();
    }
  });
  return child;
}

beforeAll(async () => {
  redis = await startRedis();
  system = await startIsolatedSystem({
    redisUrl: `redis://127.0.0.1:${redisPort}`,
    replicas: 3,
    env: { IDEM_FAULTS_ENABLED: '1', IDEM_FAULTS: 'publish-twice' },
  });
}, 300_000);
afterAll(async () => {
  await system?.stop();
  redis?.kill('SIGTERM');
  if (redis) await exited(redis);
  rmSync(redisDir, { recursive: true, force: true });
}, 120_000);

const burst = (count: number, sku: string) =>
  Promise.all(Array.from({ length: count }, () => placeOrder(system.urls, [{ sku, quantity: 1 }])));
const allPaid = async (orders: { orderId: string }[]) =>
  (await Promise.all(orders.map((o) => waitForStatus(system.urls, o.orderId, new Set(['PAID']), 120_000)))).every(
    (o) => o.status === 'PAID',
  );
const clean = () =>
  waitFor(
    async () => {
      const report = await checkSystem(system, { stuckAfterMs: 20_000 });
      return report.ok && report;
    },
    { timeoutMs: 120_000, what: 'a clean checker report' },
  );

describe('under duress', () => {
  it('three instances of every consumer, every message published twice, a burst of orders: every effect exactly once', async () => {
    const orders = await burst(60, 'keyboard');
    expect(await allPaid(orders)).toBe(true);
    const report = await clean();
    expect(report.findings.filter((f) => f.check !== 'crash_window_send')).toEqual([]);
  }, 300_000);

  it('Redis restarted and database connections killed mid-flow: nothing lost, nothing doubled, no manual step', async () => {
    const before = await burst(20, 'mouse');
    // Redis goes away (its append-only file keeps the queued jobs) while work is in flight...
    redis.kill('SIGTERM');
    await exited(redis);
    const during = await burst(10, 'mouse'); // the API keeps taking orders: they wait in the outbox
    redis = await startRedis();
    // ...and every database connection of the system is cut.
    const admin = new pg.Client({ connectionString: system.databaseUrls.orders.replace(/\/[^/]+$/, '/postgres') });
    await admin.connect();
    try {
      const names = SERVICES.map((s) => new URL(system.databaseUrls[s]).pathname.slice(1));
      await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ANY($1)`, [names]);
    } finally {
      await admin.end();
    }
    const after = await burst(10, 'mouse');
    expect(await allPaid([...before, ...during, ...after])).toBe(true);
    const report = await clean();
    expect(report.findings.filter((f) => f.check !== 'crash_window_send')).toEqual([]);
  }, 300_000);
});
