/**
 * The consumer counts a message's attempts itself: what a publisher writes in the attempt header
 * can neither skip a consumer's retries nor prolong them. Real RabbitMQ and PostgreSQL.
 */
import { createInbox, transientFailure } from '@idem/inbox';
import { createTestDatabase, rabbitmqUrl, uniqueName, waitFor, type TestDatabase } from '@idem/testkit';
import type { DeliveryReport } from '@idem/transport';
import { connect } from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bookLent, catalogue, policy } from '../test/fixtures.js';
import { ATTEMPT_HEADER } from './consumer.js';
import { exchangeOf } from './topology.js';
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
