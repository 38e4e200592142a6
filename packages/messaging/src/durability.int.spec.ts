import { spawn, type ChildProcess } from 'node:child_process';
import { randomInt, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEnvelope, type EventDraft } from '@idem/shop';
import { createRelay, enqueue } from '@idem/outbox';
import {
  createTestDatabase,
  exited,
  publishUntilAccepted,
  uniqueName,
  waitFor,
  type TestDatabase,
} from '@idem/testkit';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NotDurableError } from './durability.js';
import { createPublisher } from './publisher.js';
import { shop } from '@idem/shop';

/**
 * "Published" means as durable as asked: a Redis master and a replica of this test's own, on
 * loopback ports, and a replica that stops answering (SIGSTOP) while the relay publishes.
 */
const masterPort = randomInt(32_000, 32_100); // above the systems' ports, below the ephemeral range
const replicaPort = masterPort + 100;
const dir = mkdtempSync(join(tmpdir(), 'idem-durability-'));
const servers: ChildProcess[] = [];
let replica: ChildProcess;
let db: TestDatabase;
const redisUrl = `redis://127.0.0.1:${masterPort}`;

function startRedis(port: number, ...args: string[]): ChildProcess {
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--dir', dir, ...args],
    {
      stdio: 'ignore',
    },
  );
  servers.push(child);
  return child;
}

beforeAll(async () => {
  startRedis(masterPort);
  replica = startRedis(replicaPort, '--replicaof', '127.0.0.1', String(masterPort));
  const master = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  master.on('error', () => {}); // refused until the server is up
  try {
    // Online: synced, and acknowledging what it receives (connected alone, it may still be syncing).
    await waitFor(async () => /^slave0:.*state=online/m.test(await master.info('replication').catch(() => '')), {
      what: 'the replica to be in sync',
    });
  } finally {
    master.disconnect();
  }
  db = await createTestDatabase('durability');
});
afterAll(async () => {
  replica.kill('SIGCONT');
  await Promise.all(
    servers.map(async (child) => {
      child.kill('SIGTERM');
      await exited(child);
    }),
  );
  rmSync(dir, { recursive: true, force: true });
  await db?.drop();
});

const draft = (): EventDraft<'orders.order-placed.v1'> => ({
  type: 'orders.order-placed.v1',
  aggregateId: randomUUID(),
  aggregateVersion: 1,
  correlationId: randomUUID(),
  causationId: null,
  body: {
    orderId: randomUUID(),
    customerEmail: 'ada@example.com',
    currency: 'eur',
    paymentMethod: 'pm_card_visa',
    lines: [{ sku: 'sku-1', quantity: 1, unitPriceCents: 100 }],
    totalCents: 100,
  },
});
const placed = () => createEnvelope(draft(), new Date());

describe('a durable publication', () => {
  it('with a replica, auto waits for it: published once the replica has the jobs, refused while it does not answer', async () => {
    const publisher = createPublisher({
      catalogue: shop,
      redisUrl,
      prefix: uniqueName('idem_test_durable'),
      durabilityTimeoutMs: 300,
    });
    try {
      // Asked once the publisher's connection is up (it queues nothing while it is not).
      expect(await waitFor(() => publisher.durability().catch(() => undefined), { what: 'the durability' })).toBe(
        'replica',
      );
      // A replica that is there but still catching up (a loaded machine) acknowledges late: the
      // publication is refused and published again, as the relay does, until it is acknowledged.
      const durably = (envelope: ReturnType<typeof placed>) =>
        publishUntilAccepted(
          () => publisher.publish([envelope]),
          'a replica to acknowledge the publication',
          (error) => error instanceof NotDurableError,
        );
      await durably(placed());
      replica.kill('SIGSTOP');
      await expect(publisher.publish([placed()])).rejects.toBeInstanceOf(NotDurableError);
      replica.kill('SIGCONT');
      await durably(placed());
    } finally {
      replica.kill('SIGCONT');
      await publisher.close();
    }
  });

  it('the relay marks a row only once its publication is durable, and publishes it again until then', async () => {
    const publisher = createPublisher({
      catalogue: shop,
      redisUrl,
      prefix: uniqueName('idem_test_durable'),
      durability: 'replica',
      durabilityTimeoutMs: 300,
    });
    const relay = createRelay({
      db: db.prisma,
      publish: (envelopes) => publisher.publish(envelopes),
      backoffInitialMs: 50,
      backoffMaxMs: 200,
    });
    const published = async () =>
      (
        await db.prisma.$queryRaw<
          { n: bigint }[]
        >`SELECT count(*) AS n FROM outbox_messages WHERE published_at IS NOT NULL`
      )[0]!.n;
    try {
      replica.kill('SIGSTOP');
      await db.prisma.$transaction((tx) => enqueue(tx, shop, draft(), new Date()));
      const first = await relay.publishBatch();
      expect(first.error).toBeInstanceOf(NotDurableError);
      expect(await published()).toBe(0n);
      replica.kill('SIGCONT');
      await waitFor(async () => (await relay.publishBatch()).published === 1, { what: 'the row published again' });
      expect(await published()).toBe(1n);
    } finally {
      replica.kill('SIGCONT');
      await relay.stop();
      await publisher.close();
    }
  });

  it("'disk' is refused by a Redis without WAITAOF (before 7.2), and 'none' waits for nothing", async () => {
    const disk = createPublisher({
      catalogue: shop,
      redisUrl,
      prefix: uniqueName('idem_test_durable'),
      durability: 'disk',
    });
    const none = createPublisher({
      catalogue: shop,
      redisUrl,
      prefix: uniqueName('idem_test_durable'),
      durability: 'none',
    });
    try {
      const client = new Redis(redisUrl);
      const version = /^redis_version:(\d+)\.(\d+)/m.exec(await client.info('server'))!;
      client.disconnect();
      const hasWaitAof = Number(version[1]) > 7 || (Number(version[1]) === 7 && Number(version[2]) >= 2);
      if (hasWaitAof) await disk.publish([placed()]);
      else await expect(disk.publish([placed()])).rejects.toThrow(/unknown command|WAITAOF/i);
      replica.kill('SIGSTOP');
      await none.publish([placed()]);
    } finally {
      replica.kill('SIGCONT');
      await Promise.all([disk.close(), none.close()]);
    }
  });
});
