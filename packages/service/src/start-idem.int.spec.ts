/**
 * The published composition on both transports, with real PostgreSQL, Redis and RabbitMQ: the
 * relay publishes what the outbox holds, each consumer runs through the inbox, retention derives
 * its horizon from the transport's policy, and the operator's actions and the shutdown work as
 * a service's own code would call them.
 */
import { randomUUID } from 'node:crypto';
import { defineCatalogue, type MessageOf } from '@idem/contracts';
import { fromNodePostgres, runningAfterCommit, type SqlClient } from '@idem/database';
import { permanentFailure, processed, type MessageHandler } from '@idem/inbox';
import { bullmq } from '@idem/messaging';
import { enqueue } from '@idem/outbox';
import { deleteTopology, rabbitmq } from '@idem/rabbitmq';
import { createTestDatabase, deleteQueues, rabbitmqUrl, uniqueName, waitFor, type TestDatabase } from '@idem/testkit';
import { defaultDeliveryPolicy, type Transport } from '@idem/transport';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { RetentionError, startIdem, type Idem, type Retention, type Runs } from './index.js';

const catalogue = defineCatalogue({
  'library.book-lent.v1': {
    producer: 'library',
    body: z.object({ loanId: z.uuid(), memberId: z.string() }),
    consumers: ['billing.book-lent.v1'],
  },
});
const CONSUMER = 'billing.book-lent.v1';
type BookLent = MessageOf<typeof catalogue.contracts, typeof CONSUMER>;

/** Fast retries; the broker keeps failed deliveries a second: a replay horizon of about 1.2 s. */
const policy = { ...defaultDeliveryPolicy, attempts: 3, backoffDelayMs: 50, keepCompletedMs: 0, keepFailedMs: 1000 };
const TRANSPORTS = {
  bullmq: (prefix: string): Transport => bullmq({ prefix, policy, lockDurationMs: 1000, stalledIntervalMs: 300 }),
  rabbitmq: (prefix: string): Transport => rabbitmq({ url: rabbitmqUrl, prefix, policy }),
};

let database: TestDatabase;
let pool: pg.Pool;
let db: ReturnType<typeof fromNodePostgres>;
beforeAll(async () => {
  database = await createTestDatabase('service');
  pool = new pg.Pool({ connectionString: database.url, max: 10 });
  db = fromNodePostgres(pool);
  await pool.query('CREATE TABLE fees (loan_id uuid PRIMARY KEY, member_id text NOT NULL)');
  await pool.query('CREATE TABLE refused_members (member_id text PRIMARY KEY)');
  // As in a database migrated today: today's records go to the DEFAULT partition, which retention
  // deletes row by row (a range partition goes only whole, once its day is past the retention).
  const { rows } = await pool.query<{ name: string }>(`
    SELECT inhrelid::regclass::text AS name FROM pg_inherits
     WHERE inhparent = 'processed_messages'::regclass AND inhrelid <> 'processed_messages_default'::regclass`);
  for (const { name } of rows) await pool.query(`DROP TABLE ${name}`);
});
afterAll(async () => {
  await pool?.end();
  await database?.drop();
});
beforeEach(async () => {
  await pool.query('TRUNCATE fees, refused_members, processed_messages, dead_letters, outbox_messages');
});

/** One fee per loan; a member in `refused_members` is refused for good (a dead letter). */
const chargeFee: MessageHandler<SqlClient, BookLent> = async (message, tx) => {
  const { loanId, memberId } = message.body;
  const [refused] = await tx.$queryRaw<{ n: number }[]>`
    SELECT count(*)::int AS n FROM refused_members WHERE member_id = ${memberId}`;
  if (refused!.n > 0) return permanentFailure('member_refused', `${memberId} may not borrow`);
  await tx.$executeRaw`INSERT INTO fees (loan_id, member_id) VALUES (${loanId}::uuid, ${memberId})`;
  return processed;
};

/** A loan's event, written in `tx`; `parked` writes it as the relay parks a row. */
async function lendIn(tx: SqlClient, loanId: string, memberId = 'ada', parked = false): Promise<BookLent> {
  const written = await enqueue(
    tx,
    catalogue,
    {
      type: 'library.book-lent.v1',
      body: { loanId, memberId },
      aggregateId: loanId,
      aggregateVersion: 1,
      correlationId: randomUUID(),
      causationId: null,
    },
    new Date(),
  );
  if (parked)
    await tx.$executeRaw`
      UPDATE outbox_messages SET next_attempt_at = 'infinity', attempts = 20, last_error = 'refused'
       WHERE message_id = ${written.messageId}::uuid`;
  return written;
}

/** A loan and its event, committed together. */
async function lend(memberId = 'ada', { parked = false } = {}): Promise<{ loanId: string; event: BookLent }> {
  const loanId = randomUUID();
  return { loanId, event: await db.$transaction((tx) => lendIn(tx, loanId, memberId, parked)) };
}

const feesOf = async (loanId: string) =>
  (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM fees WHERE loan_id = $1', [loanId])).rows[0]!.n;

describe.each(Object.keys(TRANSPORTS) as (keyof typeof TRANSPORTS)[])('startIdem on %s', (name) => {
  const prefix = uniqueName(`idem_service_${name}`);
  const transport = TRANSPORTS[name](prefix);
  const outcomes: string[] = [];
  const start = ({
    retention = {},
    replayWindowMs = 60_000,
    run,
  }: { retention?: Retention; replayWindowMs?: number; run?: Runs } = {}) =>
    startIdem({
      run,
      db,
      catalogue,
      transport,
      consumers: { [CONSUMER]: chargeFee },
      relay: { pollIntervalMs: 100 },
      replayWindowMs,
      retention: { intervalMs: 0, ...retention },
      // Once the broker settled it: a copy published before could meet the job still there, and be dropped.
      onRecorded: (report) => outcomes.push(report.outcome.outcome),
    });
  let idem: Idem<SqlClient> | undefined;
  afterAll(async () => {
    await idem?.stop();
    if (name === 'bullmq') await deleteQueues(prefix);
    else
      await deleteTopology(
        { url: rabbitmqUrl, prefix, policy },
        { consumers: [CONSUMER], contracts: Object.keys(catalogue.contracts) },
      );
  });

  it('publishes what the outbox holds to the consumer, which charges once however often it comes', async () => {
    idem = start();
    await idem.ready;
    const { loanId, event } = await lend();
    await waitFor(async () => (await feesOf(loanId)) === 1 && outcomes.includes('processed'), {
      what: 'the fee of the loan, its delivery settled',
    });
    await idem.publisher.publish([event]); // a copy, as after a relay's crash
    await waitFor(() => outcomes.includes('duplicate'), { what: 'the copy suppressed' });
    expect(await feesOf(loanId)).toBe(1);
  });

  it('refuses at start an inbox retention shorter than the horizon of the policy in use', () => {
    expect(() => start({ retention: { inboxMs: 61_000 } })).toThrow(RetentionError);
    expect(() => start({ retention: { inboxMs: 61_000 } })).toThrow(/replay horizon 61150 ms/);
  });

  it('removes processed records and published rows once past their retention, and nothing sooner', async () => {
    await idem?.stop();
    idem = start({ retention: { inboxMs: 1500, outboxMs: 1000 }, replayWindowMs: 0 });
    await idem.ready;
    const { loanId } = await lend();
    await waitFor(async () => (await feesOf(loanId)) === 1, { what: 'the fee of the loan' });
    expect(await idem.maintain()).toMatchObject({ inbox: { deleted: 0 }, outboxDeleted: 0 });
    await new Promise((resolve) => setTimeout(resolve, 1600));
    expect(await idem.maintain()).toMatchObject({ inbox: { deleted: 1 }, outboxDeleted: 1 });

    // And on its own, every `intervalMs`.
    await idem.stop();
    idem = start({ retention: { inboxMs: 1500, outboxMs: 1000, intervalMs: 100 }, replayWindowMs: 0 });
    await idem.ready;
    const { loanId: later } = await lend();
    await waitFor(async () => (await feesOf(later)) === 1, { what: 'the fee of the later loan' });
    const left = async (table: string) =>
      (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`)).rows[0]!.n;
    expect(await left('processed_messages')).toBe(1);
    await waitFor(async () => (await left('processed_messages')) + (await left('outbox_messages')) === 0, {
      what: 'the maintenance on its timer',
    });
  });

  it('replays a dead letter once its cause is mended, and gives a parked row back to the relay', async () => {
    await idem?.stop();
    idem = start();
    await idem.ready;
    await pool.query("INSERT INTO refused_members VALUES ('mallory')");
    const { loanId: refused } = await lend('mallory');
    const [deadLetter] = await waitFor(
      async () => {
        const list = await idem!.deadLetters.list({ consumer: CONSUMER });
        return list.length > 0 && list;
      },
      { what: 'the dead letter' },
    );
    expect(deadLetter).toMatchObject({ code: 'member_refused' });
    await pool.query('TRUNCATE refused_members');
    expect(await idem!.deadLetters.replay({ consumer: CONSUMER })).toHaveLength(1);
    await waitFor(async () => (await feesOf(refused)) === 1, { what: 'the replayed loan charged' });

    const { loanId: parked } = await lend('ada', { parked: true });
    expect((await idem!.parked.list()).map((row) => row.lastError)).toEqual(['refused']);
    expect(await idem!.parked.retry()).toBe(1);
    await waitFor(async () => (await feesOf(parked)) === 1, { what: 'the parked loan published and charged' });
  });

  it('runs only the parts a process is given; the handoff publishes at commit, with no relay poll', async () => {
    await idem?.stop();
    // An API process: it writes events and runs neither consumers nor the relay.
    const api = start({ run: { consumers: false, relay: false, maintenance: false } });
    const { loanId } = await lend();
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await feesOf(loanId)).toBe(0);
    expect((await pool.query('SELECT 1 FROM outbox_messages WHERE published_at IS NULL')).rowCount).toBe(1);
    await api.stop();

    // A worker process: consumers and the relay, which takes what the API left.
    const afterCommit = runningAfterCommit(db);
    const handedOver: number[] = [];
    idem = startIdem({
      db: afterCommit,
      catalogue,
      transport,
      consumers: { [CONSUMER]: chargeFee },
      // Polls once an hour: only its first sweep (the API's row) and the handoff can publish.
      relay: { pollIntervalMs: 3_600_000, handoff: { onPublished: (count) => handedOver.push(count) } },
      run: { maintenance: false },
    });
    await idem.ready;
    await waitFor(async () => (await feesOf(loanId)) === 1, { what: "the API process's loan, by the relay" });
    const later = randomUUID();
    await afterCommit.$transaction((tx) => lendIn(tx, later));
    await waitFor(async () => (await feesOf(later)) === 1, { what: 'the later loan, handed over at its commit' });
    expect(handedOver).toEqual([1]);
  });

  it('stops in order: the delivery it holds ends with its commit before anything closes', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const inHandler = new Promise<void>((resolve) => (started = resolve));
    await idem!.stop();
    idem = startIdem({
      db,
      catalogue,
      transport,
      consumers: {
        [CONSUMER]: async (message, tx) => {
          started();
          await held;
          return chargeFee(message, tx);
        },
      },
      relay: true,
      replayWindowMs: 0,
    });
    await idem.ready;
    const { loanId } = await lend();
    await inHandler;
    const stopped = idem.stop(10_000);
    setTimeout(release, 200);
    await stopped;
    idem = undefined;
    expect(await feesOf(loanId)).toBe(1);
  });

  it('stops every part though a consumer fails to close: no relay left publishing, the failure thrown', async () => {
    await idem?.stop();
    idem = undefined;
    // The transport as it is, but for its consumers' close, which fails after closing.
    const failingToClose: Transport = {
      ...transport,
      startConsumer: (options) => {
        const consumer = transport.startConsumer(options);
        return {
          ready: consumer.ready,
          close: async (timeoutMs) => {
            await consumer.close(timeoutMs);
            throw new Error('this consumer failed to close');
          },
        };
      },
    };
    const stopping = startIdem({
      db,
      catalogue,
      transport: failingToClose,
      consumers: { [CONSUMER]: chargeFee },
      relay: { pollIntervalMs: 100 },
      replayWindowMs: 0,
    });
    await stopping.ready;
    await expect(stopping.stop(1000)).rejects.toThrow('this consumer failed to close');
    const { event } = await lend();
    await new Promise((resolve) => setTimeout(resolve, 500)); // five polls of a relay still running
    const { rows } = await pool.query<{ published: boolean }>(
      'SELECT published_at IS NOT NULL AS published FROM outbox_messages WHERE message_id = $1',
      [event.messageId],
    );
    expect(rows).toEqual([{ published: false }]);
  });
});
