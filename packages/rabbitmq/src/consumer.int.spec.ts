/**
 * The consumer counts a message's attempts itself: what a publisher writes in the attempt header
 * can neither skip a consumer's retries nor prolong them. Real RabbitMQ and PostgreSQL.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createInbox, processed, transientFailure } from '@idem/inbox';
import { createTestDatabase, rabbitmqUrl, uniqueName, waitFor, type TestDatabase } from '@idem/testkit';
import { backoffMs, type DeliveryReport } from '@idem/transport';
import { connect } from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bookLent, catalogue, policy } from '../test/fixtures.js';
import { ATTEMPT_HEADER } from './consumer.js';
import { deadQueueOf, exchangeOf, queueOf, retryQueueOf } from './topology.js';
import { deleteTopology, rabbitmq } from './transport.js';

const prefix = uniqueName('idem_attempts');
const CONSUMER = 'billing.book-lent.v1';
let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase('rabbitmq_attempts');
});
afterAll(async () => {
  await deleteTopology(
    { url: rabbitmqUrl, prefix, policy },
    { consumers: [CONSUMER], contracts: Object.keys(catalogue.contracts) },
  );
  await database?.drop();
});

describe('the attempt header a publisher sends', () => {
  it.each([99, -7])(
    'counts nothing: a message published with %i attempts is tried the policy’s full number of times, then dead-lettered',
    async (forged) => {
      const reports: DeliveryReport[] = [];
      const inbox = createInbox({ db: database.prisma });
      const consumer = rabbitmq({ url: rabbitmqUrl, prefix, policy }).startConsumer({
        catalogue,
        consumer: CONSUMER,
        inbox,
        handler: async () => transientFailure('ledger_down', 'the ledger is down'),
        onDelivery: (report) => reports.push(report),
      });
      const model = await connect(rabbitmqUrl);
      try {
        await consumer.ready;
        const message = bookLent();
        const channel = await model.createConfirmChannel();
        channel.publish(exchangeOf({ prefix }, message.type), '', Buffer.from(JSON.stringify(message)), {
          persistent: true,
          messageId: message.messageId,
          headers: { [ATTEMPT_HEADER]: forged },
        });
        await channel.waitForConfirms();
        const dead = await waitFor(
          async () => (await inbox.deadLetters.list({ consumer: CONSUMER, messageIds: [message.messageId] }))[0],
          { what: `the dead letter of the message sent with ${ATTEMPT_HEADER}: ${forged}` },
        );
        await new Promise((resolve) => setTimeout(resolve, 4 * policy.backoffDelayMs)); // no further attempt comes
        const attempts = reports.filter((r) => r.messageId === message.messageId).map((r) => r.attempt);
        expect(attempts).toEqual([1, 2, 3]);
        expect(dead).toMatchObject({ code: 'retries_exhausted', attempts: policy.attempts });
      } finally {
        await model.close();
        await consumer.close(1000);
      }
    },
  );
});

describe('a message past its delivery limit while its dead queue is gone', () => {
  const rabbitmqctl = (...args: string[]) =>
    promisify(execFile)('rabbitmqctl', ['--quiet', ...args]).then(({ stdout }) => stdout.trim());
  const TIMEOUT = 'dead_letter_worker_publisher_confirm_timeout';
  let resendEvery = '';
  beforeAll(async () => {
    // How soon RabbitMQ sends a dead letter not taken yet again (3 minutes unless set): 1 s for
    // this test, as its own setting, put back after it.
    resendEvery = await rabbitmqctl('eval', `application:get_env(rabbit, ${TIMEOUT}).`);
    await rabbitmqctl('eval', `application:set_env(rabbit, ${TIMEOUT}, 1000).`);
  });
  afterAll(async () => {
    const before = /\{ok,(\d+)\}/.exec(resendEvery)?.[1];
    await rabbitmqctl(
      'eval',
      before ? `application:set_env(rabbit, ${TIMEOUT}, ${before}).` : `application:unset_env(rabbit, ${TIMEOUT}).`,
    );
  });

  it('waits in its queue, and is stored as a dead letter once the consumer declared its dead queue again', async () => {
    const limited = rabbitmq({ url: rabbitmqUrl, prefix, policy, deliveryLimit: 1 });
    const AUDIT = 'audit.book-lent.v1'; // a queue of its own, declared with the limit
    await limited.subscribe({ catalogue, consumer: AUDIT });
    await rabbitmq({ url: rabbitmqUrl, prefix, policy }).subscribe({ catalogue, consumer: CONSUMER }); // the loans' other
    const model = await connect(rabbitmqUrl);
    const publisher = limited.createPublisher({ catalogue });
    const inbox = createInbox({ db: database.prisma });
    let consumer: { ready: Promise<void>; close: (ms?: number) => Promise<void> } | undefined;
    try {
      const channel = await model.createChannel();
      await channel.deleteQueue(deadQueueOf({ prefix }, AUDIT)); // lost, or deleted by mistake
      const loan = bookLent();
      await publisher.publish([loan]);
      // Its consumers die holding it, twice: past the limit, RabbitMQ dead-letters it.
      const queue = queueOf({ prefix }, AUDIT);
      for (let handedOut = 0; handedOut < 2;) {
        const message = await channel.get(queue);
        if (message) {
          channel.nack(message, false, true);
          handedOut++;
        }
      }
      consumer = limited.startConsumer({
        catalogue,
        consumer: AUDIT,
        inbox,
        handler: async () => transientFailure('never', 'never runs: RabbitMQ hands it out no more'),
      });
      await consumer.ready;
      const dead = await waitFor(async () => (await inbox.deadLetters.list({ messageIds: [loan.messageId] }))[0], {
        what: 'the dead letter, once its dead queue is back',
      });
      expect(dead).toMatchObject({ consumer: AUDIT, code: 'stalled_too_often' });
    } finally {
      await consumer?.close(1000);
      await publisher.close();
      await model.close();
      await deleteTopology(
        { url: rabbitmqUrl, prefix, policy },
        { consumers: [AUDIT], contracts: Object.keys(catalogue.contracts) },
      );
    }
  });
});

describe('a retry queue deleted while its consumer runs', () => {
  it('takes no copy: the retry comes back, the queue is declared again, and the message is retried, not lost', async () => {
    const own = uniqueName('idem_retry_queue');
    const transport = rabbitmq({ url: rabbitmqUrl, prefix: own, policy });
    await transport.subscribe({ catalogue, consumer: 'audit.book-lent.v1' }); // the loans' other consumer
    const reports: DeliveryReport[] = [];
    const errors: unknown[] = [];
    let failing = true;
    const consumer = transport.startConsumer({
      catalogue,
      consumer: CONSUMER,
      inbox: createInbox({ db: database.prisma }),
      handler: async () => (failing ? transientFailure('ledger_down', 'the ledger is down') : processed),
      onDelivery: (report) => reports.push(report),
      onError: (error) => errors.push(error),
    });
    const publisher = transport.createPublisher({ catalogue });
    const model = await connect(rabbitmqUrl);
    const outcomes = (messageId: string) =>
      reports.filter((r) => r.messageId === messageId).map((r) => r.outcome.outcome);
    try {
      await consumer.ready;
      const first = bookLent();
      await publisher.publish([first]);
      await waitFor(() => outcomes(first.messageId).length === policy.attempts, { what: 'its retries' });
      // Each delay's queue declared once, at its first copy: deleted now, as by a mistake.
      const channel = await model.createChannel();
      for (let attempt = 1; attempt < policy.attempts; attempt++)
        await channel.deleteQueue(retryQueueOf({ prefix: own }, CONSUMER, backoffMs(policy, attempt)));
      const second = bookLent();
      await publisher.publish([second]);
      await waitFor(() => errors.some((error) => String(error).includes('took no copy')), {
        what: 'the copy that came back',
      });
      failing = false;
      await waitFor(() => outcomes(second.messageId).includes('processed'), { what: 'the retried loan processed' });
    } finally {
      await consumer.close(1000);
      await publisher.close();
      await model.close();
      await deleteTopology(
        { url: rabbitmqUrl, prefix: own, policy },
        { consumers: [CONSUMER, 'audit.book-lent.v1'], contracts: Object.keys(catalogue.contracts) },
      );
    }
  });
});
