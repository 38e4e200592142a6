/**
 * One conformance suite, run on every transport (BullMQ on Redis, RabbitMQ): the same catalogue,
 * consumer and assertions; only the transport line differs (system.ts). A transport passes when
 * repeated delivery of one message makes one fee, whatever it does: copies, a conflicting copy,
 * retries, poison messages, replay, and a consumer killed between its commit and its
 * acknowledgement in the middle of a batch. Real servers: PostgreSQL, Redis, RabbitMQ.
 */
import { execFileSync } from 'node:child_process';
import { fromNodePostgres, type SqlClient } from '@idem/database';
import { defineCatalogue } from '@idem/contracts';
import { deleteTopology, rabbitmq, UnservedSubscriptionError } from '@idem/rabbitmq';
import { createInbox, type Inbox } from '@idem/inbox';
import {
  createTestDatabase,
  deleteQueues,
  exited,
  printed,
  rabbitmqUrl,
  startScript,
  uniqueName,
  waitFor,
  type TestDatabase,
} from '@idem/testkit';
import { replayDeadLetters, type Consumer, type DeliveryReport, type Publisher, type Transport } from '@idem/transport';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  bookLent,
  catalogue,
  chargeFee,
  CONSUMER,
  policy,
  TABLES,
  transportOf,
  TRANSPORTS,
  type TransportName,
} from './system.js';

let database: TestDatabase;
let pool: pg.Pool;
let db: ReturnType<typeof fromNodePostgres>;
beforeAll(async () => {
  database = await createTestDatabase('conformance');
  pool = new pg.Pool({ connectionString: database.url, max: 10 });
  db = fromNodePostgres(pool); // one client per pool: it names the statements it prepares
  await pool.query(TABLES);
});
afterAll(async () => {
  await pool?.end();
  await database?.drop();
});

/** Removes what a test made at the broker under `prefix`: queues and streams, or exchanges and queues. */
const cleanUp = (name: TransportName, prefix: string, consumers: string[]) =>
  name === 'bullmq'
    ? deleteQueues(prefix)
    : deleteTopology({ url: rabbitmqUrl, prefix, policy }, { consumers, contracts: Object.keys(catalogue.contracts) });

const fees = async () => (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM fees')).rows[0]!.n;

describe.each(TRANSPORTS)('the transport %s', (name) => {
  const prefix = uniqueName(`idem_conformance_${name}`);
  let transport: Transport;
  let publisher: Publisher;
  let inbox: Inbox<SqlClient>;
  let reports: DeliveryReport[];
  const running: Consumer[] = [];

  beforeAll(() => {
    transport = transportOf(name, prefix);
    publisher = transport.createPublisher({ catalogue });
    inbox = createInbox({ db });
  });
  afterAll(async () => {
    await publisher.close();
    await cleanUp(name, prefix, [CONSUMER]);
  });
  beforeEach(async () => {
    reports = [];
    await pool.query('TRUNCATE fees, failing_books, processed_messages, dead_letters');
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((consumer) => consumer.close(1000)));
  });

  async function start(on = transport) {
    const consumer = on.startConsumer({
      catalogue,
      consumer: CONSUMER,
      inbox,
      handler: chargeFee,
      onDelivery: (report) => reports.push(report),
    });
    running.push(consumer);
    await consumer.ready;
    return consumer;
  }
  const outcomesOf = (messageId: string) =>
    reports.filter((r) => r.messageId === messageId).map((r) => r.outcome.outcome);
  const waitForOutcome = (messageId: string, outcome: string, count = 1) =>
    waitFor(() => outcomesOf(messageId).filter((o) => o === outcome).length >= count, {
      what: `${count} ${outcome} of ${messageId} on ${name}`,
    });
  const deadLetterOf = (messageId: string) =>
    waitFor(async () => (await inbox.deadLetters.list({ consumer: CONSUMER, messageIds: [messageId] }))[0], {
      what: `the dead letter of ${messageId} on ${name}`,
    });

  it('loses nothing published before its consumer first started: what was accepted waits for it, what was refused the relay publishes again', async () => {
    const fresh = `${prefix}_first`; // a system whose consumer has never run
    const late = transportOf(name, fresh);
    const producer = late.createPublisher({ catalogue });
    try {
      const messages = await Promise.all([bookLent(), bookLent(), bookLent()]);
      // Before the consumer started: the publication is accepted, or refused (and the relay keeps it).
      const accepted = await producer.publish(messages).then(
        () => true,
        () => false,
      );
      await start(late);
      if (!accepted) await producer.publish(messages); // the relay, publishing again
      for (const message of messages) await waitForOutcome(message.messageId, 'processed');
      expect(await fees()).toBe(messages.length);
    } finally {
      await Promise.all(running.splice(0).map((consumer) => consumer.close(1000)));
      await producer.close();
      await cleanUp(name, fresh, [CONSUMER]);
    }
  });

  it('charges one fee for a message published three times', async () => {
    await start();
    const message = await bookLent();
    for (const outcome of ['processed', 'duplicate', 'duplicate']) {
      await publisher.publish([message]);
      await waitForOutcome(
        message.messageId,
        outcome,
        outcome === 'duplicate' ? outcomesOf(message.messageId).length : 1,
      );
    }
    expect(outcomesOf(message.messageId)).toEqual(['processed', 'duplicate', 'duplicate']);
    expect(await fees()).toBe(1);
  });

  it('reports a copy with the same id and another body as a conflicting duplicate, and changes nothing', async () => {
    await start();
    const message = await bookLent();
    await publisher.publish([message]);
    await waitForOutcome(message.messageId, 'processed');
    await publisher.publish([{ ...message, body: { ...message.body, days: 7 } }]);
    await waitForOutcome(message.messageId, 'conflicting_duplicate');
    expect(await fees()).toBe(1);
  });

  it('retries a transient failure with backoff, then charges once', async () => {
    await start();
    const message = await bookLent('9780000000001');
    await pool.query('INSERT INTO failing_books VALUES ($1)', [message.body.isbn]);
    await publisher.publish([message]);
    await waitForOutcome(message.messageId, 'transient_failure');
    await pool.query('DELETE FROM failing_books');
    await waitForOutcome(message.messageId, 'processed');
    const attempts = reports.filter((r) => r.messageId === message.messageId).map((r) => r.attempt);
    expect(attempts[0]).toBe(1);
    expect(attempts.at(-1)).toBeGreaterThan(1);
    expect(await fees()).toBe(1);
  });

  it('keeps a message that keeps failing as a dead letter; a replay charges it once, a second replay not again', async () => {
    await start();
    const message = await bookLent('9780000000002');
    await pool.query('INSERT INTO failing_books VALUES ($1)', [message.body.isbn]);
    await publisher.publish([message]);
    const dead = await deadLetterOf(message.messageId);
    expect(dead).toMatchObject({ code: 'retries_exhausted', attempts: policy.attempts, payload: message });
    expect(outcomesOf(message.messageId)).toEqual(Array(policy.attempts).fill('transient_failure'));

    await pool.query('DELETE FROM failing_books');
    await replayDeadLetters(inbox.deadLetters, publisher, { consumer: CONSUMER });
    await waitForOutcome(message.messageId, 'processed');
    await publisher.redeliver(CONSUMER, message.messageId, message);
    await waitForOutcome(message.messageId, 'duplicate');
    expect(await fees()).toBe(1);
    expect(await inbox.deadLetters.list({ consumer: CONSUMER })).toEqual([]);
  });

  it('stores a poison message exactly as it came, counts it once, and keeps serving', async () => {
    await start();
    const message = await bookLent();
    const poison = { ...message, body: { ...message.body, isbn: '123' } };
    await publisher.redeliver(CONSUMER, message.messageId, poison);
    const dead = await deadLetterOf(message.messageId);
    expect(dead.code).toBe('invalid_body');
    expect(dead.payload).toEqual(poison);
    expect(dead.attempts).toBe(1);

    const valid = await bookLent();
    await publisher.publish([valid]);
    await waitForOutcome(valid.messageId, 'processed');
    expect(outcomesOf(message.messageId)).toEqual(['permanent_failure']);
    expect(await fees()).toBe(1);
  });

  it('redelivers every message of a batch whose consumer died between its commit and its acknowledgement: one fee each', async () => {
    const child = startScript(new URL('./consumer-process.ts', import.meta.url), {
      TRANSPORT: name,
      DATABASE_URL: database.url,
      IDEM_PREFIX: prefix,
      IDEM_FAULTS_ENABLED: '1',
      IDEM_FAULTS: `crash-after-commit consumer=${CONSUMER} count=1`,
    });
    await printed(child, 'ready');
    const messages = await Promise.all(Array.from({ length: 6 }, () => bookLent()));
    await publisher.publish(messages);
    expect(await exited(child)).toBe('SIGKILL');
    const chargedBeforeTheCrash = await fees();
    expect(chargedBeforeTheCrash).toBeGreaterThan(0);

    await start();
    for (const { messageId } of messages)
      await waitFor(() => outcomesOf(messageId).some((o) => o === 'processed' || o === 'duplicate'), {
        what: `${messageId} settled after the crash on ${name}`,
      });
    // What the dead process committed comes back as duplicates; the rest is processed now.
    expect(reports.filter((r) => r.outcome.outcome === 'duplicate').length).toBe(chargedBeforeTheCrash);
    expect(await fees()).toBe(messages.length);
  });
});

describe.each(TRANSPORTS)('%s: subscriptions belong to consumers', (name) => {
  const prefix = uniqueName(`idem_subscriptions_${name}`);
  const AUDIT = 'audit.book-lent.v1';
  // The same contract with one more consumer: what the new consumer's team declares. The
  // producer keeps the catalogue it was deployed with, which does not name that consumer.
  const later = defineCatalogue({
    'library.book-lent.v1': { ...catalogue.contracts['library.book-lent.v1'], consumers: [CONSUMER, AUDIT] },
  });
  afterAll(() => cleanUp(name, prefix, [CONSUMER, AUDIT]));

  const startAudit = (transport: Transport, audited: string[], errors: unknown[]) =>
    transport.startConsumer({
      catalogue: later,
      consumer: AUDIT,
      inbox: createInbox({ db }),
      handler: async () => ({ outcome: 'processed' }) as const,
      onDelivery: (report) => audited.push(report.messageId),
      onError: (error) => errors.push(error),
    });

  it("delivers a running producer's next event to a consumer added after it, the producer never told", async () => {
    const transport = transportOf(name, prefix);
    await transport.subscribe({ catalogue, consumer: CONSUMER }); // the consumer its catalogue names
    const producer = transport.createPublisher({ catalogue }); // deployed before audit existed
    const before = await bookLent();
    await producer.publish([before]);

    const audited: string[] = [];
    const errors: unknown[] = [];
    const audit = startAudit(transport, audited, errors);
    await audit.ready;
    const next = await bookLent();
    await producer.publish([next]);
    await waitFor(() => audited.includes(next.messageId), { what: 'the next event at the consumer added later' });
    expect(audited).toEqual([next.messageId]); // from its start on, nothing from before
    expect(errors).toEqual([]);
    await audit.close();
    await producer.close();
  });

  it('says at start which of its subscriptions no producer serves yet, and runs', async () => {
    const errors: unknown[] = [];
    const audit = startAudit(transportOf(name, `${prefix}_unserved`), [], errors);
    await audit.ready;
    expect(errors).toEqual([expect.any(UnservedSubscriptionError)]);
    expect((errors[0] as Error).message).toMatch(
      /audit\.book-lent\.v1 subscribes to library\.book-lent\.v1, which no producer has declared yet/,
    );
    await audit.close();
    await cleanUp(name, `${prefix}_unserved`, [AUDIT]);
  });
});

describe('RabbitMQ: a retry copy RabbitMQ refuses', () => {
  const prefix = uniqueName('idem_refused_retry');
  const refusing = `${prefix}_refuse_retries`;
  // Retries that wait 5 s: the first copy stays in its queue while the next ones are refused.
  const slowRetries = { ...policy, backoffDelayMs: 5000 };
  const rabbitmqctl = (...args: string[]) => execFileSync('rabbitmqctl', ['--quiet', ...args], { stdio: 'pipe' });
  afterAll(async () => {
    await deleteTopology(
      { url: rabbitmqUrl, prefix, policy: slowRetries },
      { consumers: [CONSUMER], contracts: Object.keys(catalogue.contracts) },
    );
  });

  it('holds the delivery and tries again after a wait, never counted as a consumer that died', async () => {
    await pool.query('TRUNCATE fees, failing_books, processed_messages, dead_letters');
    // The consumer's retry queues take nothing more: a quorum queue refuses a publication once it
    // is over its length (a nack of its confirm), so the first copy is taken and every next one
    // refused while it waits.
    const retryQueues = `^${prefix}\\..*\\.retry\\.`;
    rabbitmqctl(
      'set_policy',
      refusing,
      retryQueues,
      '{"max-length":0,"overflow":"reject-publish"}',
      '--apply-to',
      'queues',
    );
    const transport = rabbitmq({ url: rabbitmqUrl, prefix, policy: slowRetries, deliveryLimit: 1 }); // one message handed back ends it
    const errors: unknown[] = [];
    const consumer = transport.startConsumer({
      catalogue,
      consumer: CONSUMER,
      inbox: createInbox({ db }),
      handler: chargeFee,
      onError: (error) => errors.push(error),
    });
    const publisher = transport.createPublisher({ catalogue });
    try {
      await consumer.ready;
      const messages = await Promise.all([bookLent('9780000000001'), bookLent('9780000000001')]);
      await pool.query("INSERT INTO failing_books VALUES ('9780000000001')");
      await publisher.publish(messages);
      const refused = () => errors.filter((error) => String(error).includes('nacked')).length;
      await waitFor(() => refused() >= 2, { what: 'two retry copies refused, a second apart' });
      expect(await createInbox({ db }).deadLetters.list()).toEqual([]); // not `stalled_too_often`: it was never handed back

      rabbitmqctl('clear_policy', refusing);
      await pool.query('TRUNCATE failing_books');
      await waitFor(async () => (await fees()) === 2, { what: 'the fees, once the retry copies were taken' });
      expect(await createInbox({ db }).deadLetters.list()).toEqual([]);
    } finally {
      if (rabbitmqctl('list_policies').toString().includes(refusing)) rabbitmqctl('clear_policy', refusing);
      await consumer.close(1000);
      await publisher.close();
    }
  });
});

describe('RabbitMQ: an onRecorded that throws', () => {
  const prefix = uniqueName('idem_throwing_recorded');
  afterAll(() =>
    deleteTopology(
      { url: rabbitmqUrl, prefix, policy },
      { consumers: [CONSUMER], contracts: Object.keys(catalogue.contracts) },
    ),
  );

  it('settles each delivery once all the same: no second acknowledgement, no second run', async () => {
    await pool.query('TRUNCATE fees, failing_books, processed_messages, dead_letters');
    const transport = rabbitmq({ url: rabbitmqUrl, prefix, policy });
    const errors: unknown[] = [];
    const outcomes: string[] = [];
    const consumer = transport.startConsumer({
      catalogue,
      consumer: CONSUMER,
      inbox: createInbox({ db }),
      handler: chargeFee,
      onDelivery: (report) => outcomes.push(report.outcome.outcome),
      onRecorded: () => {
        throw new Error('the journal is down');
      },
      onError: (error) => errors.push(error),
    });
    const publisher = transport.createPublisher({ catalogue });
    try {
      await consumer.ready;
      errors.length = 0; // what start said of subscriptions no producer served yet
      await publisher.publish([await bookLent(), await bookLent()]);
      await waitFor(async () => (await fees()) === 2, { what: 'both fees' });
      await new Promise((resolve) => setTimeout(resolve, 1500)); // past the wait before a second try
      expect(outcomes).toEqual(['processed', 'processed']);
      expect(errors.map(String)).toEqual(['Error: the journal is down', 'Error: the journal is down']);
    } finally {
      await consumer.close(1000);
      await publisher.close();
    }
  });
});

describe('RabbitMQ: a consumer killed between its retry copy and its acknowledgement', () => {
  const prefix = uniqueName('idem_retry_copy_crash');
  afterAll(() =>
    deleteTopology(
      { url: rabbitmqUrl, prefix, policy },
      { consumers: [CONSUMER], contracts: Object.keys(catalogue.contracts) },
    ),
  );

  it('leaves two copies, the delivery and its retry: the fee is charged once, nothing dead-lettered', async () => {
    await pool.query('TRUNCATE fees, failing_books, processed_messages, dead_letters');
    const message = await bookLent('9780000000003');
    await pool.query('INSERT INTO failing_books VALUES ($1)', [message.body.isbn]);
    const child = startScript(new URL('./consumer-process.ts', import.meta.url), {
      TRANSPORT: 'rabbitmq',
      DATABASE_URL: database.url,
      IDEM_PREFIX: prefix,
      IDEM_FAULTS_ENABLED: '1',
      IDEM_FAULTS: `crash-after-retry-copy consumer=${CONSUMER} count=1`,
    });
    const transport = transportOf('rabbitmq', prefix);
    const publisher = transport.createPublisher({ catalogue });
    const outcomes: string[] = [];
    let consumer: Consumer | undefined;
    try {
      await printed(child, 'ready');
      await publisher.publish([message]);
      expect(await exited(child)).toBe('SIGKILL'); // its retry copy confirmed, the delivery never acknowledged
      await pool.query('TRUNCATE failing_books');
      consumer = transport.startConsumer({
        catalogue,
        consumer: CONSUMER,
        inbox: createInbox({ db }),
        handler: chargeFee,
        onDelivery: (report) => outcomes.push(report.outcome.outcome),
      });
      await consumer.ready;
      await waitFor(() => outcomes.length === 2, { what: 'the delivery handed out again, and its retry copy' });
      expect(outcomes.sort()).toEqual(['duplicate', 'processed']);
      expect(await fees()).toBe(1);
      expect(await createInbox({ db }).deadLetters.list()).toEqual([]);
    } finally {
      await consumer?.close(1000);
      await publisher.close();
    }
  });
});
