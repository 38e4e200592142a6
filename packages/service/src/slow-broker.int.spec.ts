/**
 * The composition where its links to the broker are slow, then dead: the handoff and the relay
 * publish over one network path (testkit's `startNetworkPath`) to the real RabbitMQ or Redis, the
 * consumer takes its deliveries over another. First every chunk of the producer's link is delayed;
 * then each link in turn is blackholed — its connections stay open and are never answered or
 * closed again, as behind a dead link. Under load from writers committing at once, every loan is
 * charged exactly once: none lost while the broker was out of reach, none charged twice by what
 * was published or delivered again, and work resumes on new connections once the route is back,
 * the dead ones dropped by the clients' own timeouts (a publication's, a worker's liveness
 * looks, RabbitMQ's heartbeat).
 */
import { randomUUID } from 'node:crypto';
import { defineCatalogue, type MessageOf } from '@idem/contracts';
import { fromNodePostgres, runningAfterCommit, type SqlClient } from '@idem/database';
import { processed, type MessageHandler } from '@idem/inbox';
import { bullmq } from '@idem/messaging';
import { enqueue } from '@idem/outbox';
import { deleteTopology, rabbitmq } from '@idem/rabbitmq';
import {
  createTestDatabase,
  deleteQueues,
  rabbitmqUrl,
  startNetworkPath,
  uniqueName,
  waitFor,
  type NetworkPath,
  type TestDatabase,
} from '@idem/testkit';
import { defaultDeliveryPolicy, type Transport } from '@idem/transport';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { startIdem, type Idem } from './index.js';

const catalogue = defineCatalogue({
  'library.book-lent.v1': {
    producer: 'library',
    body: z.object({ loanId: z.uuid() }),
    consumers: ['billing.book-lent.v1'],
  },
});
const CONSUMER = 'billing.book-lent.v1';
type BookLent = MessageOf<typeof catalogue.contracts, typeof CONSUMER>;
const policy = { ...defaultDeliveryPolicy, attempts: 5, backoffDelayMs: 100, keepCompletedMs: 0 };

/**
 * Each transport, reached through `port` (a path's), with what ends a dead connection made quick:
 * a heartbeat of a second; a worker's liveness look every 5 s.
 */
const TRANSPORTS = {
  rabbitmq: {
    server: { host: '127.0.0.1', port: 5672 },
    transport: (prefix: string, port: number): Transport =>
      rabbitmq({ url: `amqp://guest:guest@127.0.0.1:${port}`, prefix, policy, heartbeatSeconds: 1 }),
    cleanUp: (prefix: string) =>
      deleteTopology(
        { url: rabbitmqUrl, prefix, policy },
        { consumers: [CONSUMER], contracts: Object.keys(catalogue.contracts) },
      ),
  },
  bullmq: {
    server: { host: '127.0.0.1', port: 6379 },
    transport: (prefix: string, port: number): Transport =>
      bullmq({
        redisUrl: `redis://127.0.0.1:${port}`,
        prefix,
        policy,
        durabilityTimeoutMs: 500,
        stalledIntervalMs: 5000,
      }),
    cleanUp: deleteQueues,
  },
};

let database: TestDatabase;
let pool: pg.Pool;
let db: ReturnType<typeof fromNodePostgres>;
beforeAll(async () => {
  database = await createTestDatabase('slow_broker');
  pool = new pg.Pool({ connectionString: database.url, max: 12 });
  db = fromNodePostgres(pool);
  // No key: a loan charged twice shows as two rows, not as a refused insert.
  await pool.query('CREATE TABLE fees (loan_id uuid NOT NULL)');
});
afterAll(async () => {
  await pool?.end();
  await database?.drop();
});

const chargeFee: MessageHandler<SqlClient, BookLent> = async (message, tx) => {
  await tx.$executeRaw`INSERT INTO fees (loan_id) VALUES (${message.body.loanId}::uuid)`;
  return processed;
};

/** Fees charged, and loans charged: equal when no loan was charged twice. */
async function charged(): Promise<{ fees: number; loans: number }> {
  const { rows } = await pool.query<{ fees: number; loans: number }>(
    'SELECT count(*)::int AS fees, count(DISTINCT loan_id)::int AS loans FROM fees',
  );
  return rows[0]!;
}

describe.each(Object.keys(TRANSPORTS) as (keyof typeof TRANSPORTS)[])('startIdem on %s', (name) => {
  const prefix = uniqueName(`idem_slow_${name}`);
  let path: NetworkPath; // the producer's
  let consumerPath: NetworkPath;
  let idem: Idem<SqlClient> | undefined;
  let writer: typeof db;
  let written = 0;

  beforeAll(async () => {
    await pool.query('TRUNCATE fees, outbox_messages, processed_messages');
    const { server, transport } = TRANSPORTS[name];
    path = await startNetworkPath(server);
    consumerPath = await startNetworkPath(server);
    writer = runningAfterCommit(db);
    idem = startIdem({
      db: writer,
      catalogue,
      // Published over one path, consumed over the other.
      transport: {
        ...transport(prefix, consumerPath.port),
        createPublisher: transport(prefix, path.port).createPublisher,
      },
      consumers: { [CONSUMER]: chargeFee },
      relay: { pollIntervalMs: 200, publishTimeoutMs: 1000, backoffInitialMs: 200, backoffMaxMs: 1000, handoff: true },
      run: { maintenance: false },
    });
    await idem.ready;
  });
  afterAll(async () => {
    path?.restore();
    consumerPath?.restore();
    await idem?.stop(1000);
    await Promise.all([path?.close(), consumerPath?.close()]);
    await TRANSPORTS[name].cleanUp(prefix);
  });

  /** `count` loans, each committed with its event, by eight writers at once; resolves once all committed. */
  async function lend(count: number): Promise<void> {
    let left = count;
    const oneWriter = async () => {
      while (left-- > 0)
        await writer.$transaction(async (tx) => {
          const loanId = randomUUID();
          await enqueue(
            tx,
            catalogue,
            {
              type: 'library.book-lent.v1',
              body: { loanId },
              aggregateId: loanId,
              aggregateVersion: 1,
              correlationId: randomUUID(),
              causationId: null,
            },
            new Date(),
          );
        });
    };
    await Promise.all(Array.from({ length: 8 }, oneWriter));
    written += count;
  }
  /** Every connection the link cut is closed by its client in the end (a worker replaced is closed in the background). */
  const allDropped = (cut: NetworkPath) =>
    waitFor(async () => cut.deadConnections() === 0, { what: 'the dead connections dropped', timeoutMs: 10_000 });
  const allCharged = (timeoutMs = 60_000) =>
    waitFor(async () => (await charged()).loans === written, { what: `all ${written} loans charged`, timeoutMs });

  it('charges each of 200 loans once over a link that delays every chunk by 30 ms each way', async () => {
    path.latency(30);
    await lend(200);
    await allCharged();
    expect(await charged()).toEqual({ fees: written, loans: written });
    path.latency(0);
  }, 90_000);

  it('keeps committing behind a dead link, drops its dead connections, and charges every loan once on new ones', async () => {
    path.blackhole();
    const forwarded = path.forwarded();
    await lend(100); // the writers never wait for the broker
    await new Promise((resolve) => setTimeout(resolve, 3_000)); // publications time out meanwhile
    expect(path.forwarded()).toBe(forwarded); // nothing reached the broker
    const { rows } = await pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM outbox_messages WHERE published_at IS NULL',
    );
    expect(rows[0]!.n).toBeGreaterThan(0);
    // The route is back, the dead connections stay dead: only a publisher that gives them up
    // publishes again — well before a heartbeat (RabbitMQ's 60 s) or the kernel would end them.
    path.restore();
    await allCharged(20_000);
    expect(await charged()).toEqual({ fees: written, loans: written });
    await allDropped(path);
  }, 90_000);

  it("takes deliveries again on new connections once the consumer's dead link is back, each loan charged once", async () => {
    consumerPath.blackhole();
    await lend(100); // published, and waiting at the broker
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect((await charged()).loans).toBeLessThan(written); // the consumer took nothing meanwhile
    // Its connections stay dead: only a consumer that drops them takes deliveries again — well
    // before RabbitMQ's own 60 s heartbeat or the kernel would end them.
    consumerPath.restore();
    await allCharged(40_000);
    expect(await charged()).toEqual({ fees: written, loans: written });
    await allDropped(consumerPath);
  }, 90_000);
});
