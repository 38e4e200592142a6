/**
 * What a publication on RabbitMQ counts as published: only what reached the queue of every consumer
 * the catalogue names. A fanout exchange keeps nothing for a queue not bound yet, or gone: the
 * publication fails instead, and the outbox keeps the event. Real RabbitMQ and PostgreSQL; the
 * consumer started after the producer, the queue deleted as an operator or a lost node would.
 */
import { createInbox, processed, transientFailure } from '@idem/inbox';
import { createTestDatabase, rabbitmqUrl, uniqueName, waitFor, type TestDatabase } from '@idem/testkit';
import { replayDeadLetters } from '@idem/transport';
import { connect } from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bookLent, catalogue, policy } from '../test/fixtures.js';
import { NotSubscribedError } from './not-subscribed-error.js';
import { queueOf } from './topology.js';
import { deleteTopology, rabbitmq } from './transport.js';

const prefix = uniqueName('idem_publications');
const [BILLING, AUDIT] = catalogue.contracts['library.book-lent.v1'].consumers;
const transport = rabbitmq({ url: rabbitmqUrl, prefix, policy });
let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase('rabbitmq_publications');
});
afterAll(async () => {
  await deleteTopology(
    { url: rabbitmqUrl, prefix, policy },
    { consumers: [BILLING, AUDIT], contracts: Object.keys(catalogue.contracts) },
  );
  await database?.drop();
});

/** Deletes a queue as an administrator: what an operator's mistake or a lost node leaves. */
async function deleteQueue(consumer: string): Promise<void> {
  const model = await connect(rabbitmqUrl);
  try {
    await (await model.createChannel()).deleteQueue(queueOf({ prefix }, consumer));
  } finally {
    await model.close();
  }
}

describe('a publication on RabbitMQ', () => {
  it("is refused until every consumer the catalogue names has subscribed, then reaches each one's queue", async () => {
    const publisher = transport.createPublisher({ catalogue });
    try {
      const loan = bookLent();
      await expect(publisher.publish([loan])).rejects.toThrow(NotSubscribedError);
      await transport.subscribe({ catalogue, consumer: BILLING });
      await expect(publisher.publish([loan])).rejects.toThrow(new NotSubscribedError(AUDIT, loan.type).message);
      await transport.subscribe({ catalogue, consumer: AUDIT });
      await publisher.publish([loan]);
      const model = await connect(rabbitmqUrl);
      try {
        const channel = await model.createChannel();
        for (const consumer of [BILLING, AUDIT])
          expect((await channel.checkQueue(queueOf({ prefix }, consumer))).messageCount).toBe(1);
        await Promise.all([BILLING, AUDIT].map((consumer) => channel.purgeQueue(queueOf({ prefix }, consumer))));
      } finally {
        await model.close();
      }
    } finally {
      await publisher.close();
    }
  });

  it('fails where no queue took the message (every subscriber’s queue deleted): not confirmed to nobody', async () => {
    await transport.subscribe({ catalogue, consumer: BILLING });
    await transport.subscribe({ catalogue, consumer: AUDIT });
    const publisher = transport.createPublisher({ catalogue });
    try {
      await publisher.publish([bookLent()]); // both subscribed
      await Promise.all([deleteQueue(BILLING), deleteQueue(AUDIT)]);
      const loan = bookLent();
      await expect(publisher.publish([loan])).rejects.toThrow(`${loan.messageId} reached no queue`);
      await transport.subscribe({ catalogue, consumer: BILLING }); // its next start declares the queue again
      await publisher.publish([loan]);
    } finally {
      await publisher.close();
    }
  });

  it('replays a dead letter only into a queue that takes it: to a deleted one the replay fails, and the dead letter stays', async () => {
    const inbox = createInbox({ db: database.prisma });
    const consumer = transport.startConsumer({
      catalogue,
      consumer: BILLING,
      inbox,
      handler: async () => transientFailure('ledger_down', 'the ledger is down'),
    });
    await transport.subscribe({ catalogue, consumer: AUDIT });
    const publisher = transport.createPublisher({ catalogue });
    try {
      await consumer.ready;
      const loan = bookLent();
      await publisher.publish([loan]);
      await waitFor(async () => (await inbox.deadLetters.list({ messageIds: [loan.messageId] })).length === 1, {
        what: 'the dead letter',
      });
      await consumer.close(1000);
      await deleteQueue(BILLING);
      await expect(
        replayDeadLetters(inbox.deadLetters, publisher, { consumer: BILLING, messageIds: [loan.messageId] }),
      ).rejects.toThrow(`${BILLING} has no queue to take ${loan.messageId}`);
      expect(await inbox.deadLetters.list({ messageIds: [loan.messageId] })).toHaveLength(1); // not marked replayed
    } finally {
      await consumer.close(1000);
      await publisher.close();
    }
  });

  it('reaches a consumer whose queue was deleted once it declared it again, on its own, without a restart', async () => {
    const inbox = createInbox({ db: database.prisma });
    const delivered: string[] = [];
    const consumer = transport.startConsumer({
      catalogue,
      consumer: BILLING,
      inbox,
      handler: async () => processed,
      onDelivery: (report) => delivered.push(report.messageId),
    });
    await transport.subscribe({ catalogue, consumer: AUDIT });
    const publisher = transport.createPublisher({ catalogue });
    try {
      await consumer.ready;
      await deleteQueue(BILLING);
      const model = await connect(rabbitmqUrl);
      try {
        await waitFor(
          async () => {
            const channel = await model.createChannel();
            channel.on('error', () => {}); // a 404 closes this channel only
            return channel.checkQueue(queueOf({ prefix }, BILLING)).then(
              () => true,
              () => false,
            );
          },
          { what: "billing's queue declared again" },
        );
      } finally {
        await model.close();
      }
      const loan = bookLent();
      await waitFor(
        async () => {
          await publisher.publish([loan]); // bound again once its queue is back; the inbox takes a copy
          return delivered.includes(loan.messageId);
        },
        { what: 'the loan at billing, on its queue declared again' },
      );
    } finally {
      await consumer.close(1000);
      await publisher.close();
    }
  });
});
