/**
 * Each service on RabbitMQ as a user of its own, with `rabbitmqPermissionsOf` its permissions, on
 * the machine's real RabbitMQ: a virtual host and users made for this file (`rabbitmqctl`), deleted
 * after it. Billing's user runs its subscription from start to dead letter and replay, and is
 * refused everything of the library's and of audit's; a producer's user looks whether its
 * consumers subscribed, and a consumer's says it did.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { reachOf } from '@idem/contracts';
import { createInbox, processed, transientFailure } from '@idem/inbox';
import { createTestDatabase, rabbitmqUrl, uniqueName, waitFor, type TestDatabase } from '@idem/testkit';
import { replayDeadLetters, type DeliveryReport } from '@idem/transport';
import { connect, type ChannelModel, type ConfirmChannel } from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bookLent, catalogue, feeCharged, policy } from '../test/fixtures.js';
import { rabbitmqPermissionsOf } from './permissions.js';
import { exchangeOf, queueOf, redeliveryExchangeOf, retryQueueOf } from './topology.js';
import { rabbitmq } from './transport.js';
import { NotSubscribedError } from './not-subscribed-error.js';
import { UnboundSubscriptionError } from './unbound-subscription-error.js';

const rabbitmqctl = (...args: string[]) => promisify(execFile)('rabbitmqctl', ['--quiet', ...args]);
const vhost = uniqueName('idem_permissions');
const SERVICES = ['library', 'billing', 'audit'] as const;
type Service = (typeof SERVICES)[number] | 'admin';
const passwords = Object.fromEntries(
  [...SERVICES, 'admin'].map((service) => [service, randomBytes(16).toString('hex')]),
) as Record<Service, string>;
const userOf = (service: Service) => `${vhost}-${service}`;
const server = new URL(rabbitmqUrl);
/** The machine's RabbitMQ, on this file's virtual host, as `service`'s own user. */
const urlOf = (service: Service) =>
  `amqp://${userOf(service)}:${passwords[service]}@${server.host}/${encodeURIComponent(vhost)}`;
const transportOf = (service: Service) => rabbitmq({ url: urlOf(service), policy });

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase('rabbitmq_permissions');
  await rabbitmqctl('add_vhost', vhost);
  await Promise.all([...SERVICES, 'admin' as const].map((s) => rabbitmqctl('add_user', userOf(s), passwords[s])));
  await Promise.all([
    rabbitmqctl('set_permissions', '-p', vhost, userOf('admin'), '.*', '.*', '.*'),
    ...SERVICES.map((service) => {
      const { configure, write, read } = rabbitmqPermissionsOf(reachOf(catalogue, service));
      return rabbitmqctl('set_permissions', '-p', vhost, userOf(service), configure, write, read);
    }),
  ]);
});
afterAll(async () => {
  await rabbitmqctl('delete_vhost', vhost); // with every exchange, queue and permission in it
  await Promise.all([...SERVICES, 'admin' as const].map((service) => rabbitmqctl('delete_user', userOf(service))));
  await database?.drop();
});

describe("billing's own RabbitMQ user", () => {
  it('runs its subscription end to end: declares, binds once the library declared, consumes, retries, dead-letters, replays; publishes its own contract', async () => {
    const inbox = createInbox({ db: database.prisma });
    const failing = new Set<string>();
    const reports: DeliveryReport[] = [];
    const errors: unknown[] = [];
    const billing = transportOf('billing');
    const consumer = billing.startConsumer({
      catalogue,
      consumer: 'billing.book-lent.v1',
      inbox,
      handler: async (message) =>
        failing.has(message.messageId) ? transientFailure('ledger_down', 'the ledger is down') : processed,
      onDelivery: (report) => reports.push(report),
      onError: (error) => errors.push(error),
    });
    const library = transportOf('library').createPublisher({ catalogue });
    const billingPublisher = billing.createPublisher({ catalogue });
    const outcomesOf = (messageId: string) =>
      reports.filter((r) => r.messageId === messageId).map((r) => `${r.outcome.outcome}:${r.attempt}`);
    const audit = transportOf('audit');
    try {
      // Started before the library ever published: it may not declare the library's exchange.
      await consumer.ready;
      expect(errors).toEqual([expect.any(UnboundSubscriptionError)]);
      const first = bookLent();
      // The library declares its exchange and refuses to publish until billing has bound to it (and
      // audit, its other consumer, subscribed): the outbox keeps the loan, and the relay publishes it
      // again.
      await expect(library.publish([first])).rejects.toThrow(NotSubscribedError);
      await expect(audit.subscribe({ catalogue, consumer: 'audit.book-lent.v1' })).resolves.toBeUndefined();
      await waitFor(
        async () => {
          await library.publish([first]).catch(() => {});
          return outcomesOf(first.messageId).length > 0;
        },
        { what: 'billing bound to the loans once the library declared their exchange' },
      );

      const retried = bookLent();
      failing.add(retried.messageId);
      await library.publish([retried]);
      await waitFor(() => outcomesOf(retried.messageId).length === 1, { what: 'the first attempt' });
      failing.delete(retried.messageId);
      await waitFor(() => outcomesOf(retried.messageId).includes('processed:2'), { what: 'the retry processed' });

      const dead = bookLent();
      failing.add(dead.messageId);
      await library.publish([dead]);
      await waitFor(async () => (await inbox.deadLetters.list({ messageIds: [dead.messageId] })).length === 1, {
        what: 'the dead letter',
      });
      expect(outcomesOf(dead.messageId)).toEqual(['transient_failure:1', 'transient_failure:2', 'transient_failure:3']);
      failing.delete(dead.messageId);
      await replayDeadLetters(inbox.deadLetters, billingPublisher, { consumer: 'billing.book-lent.v1' });
      await waitFor(() => outcomesOf(dead.messageId).includes('processed:1'), { what: 'the replay processed' });

      // Its own contract, once audit bound to it (audit may not declare billing's exchange).
      await expect(billingPublisher.publish([feeCharged()])).rejects.toThrow(NotSubscribedError);
      await audit.subscribe({ catalogue, consumer: 'audit.fee-charged.v1' });
      await billingPublisher.publish([feeCharged()]);
      await billing.subscribe({ catalogue, consumer: 'billing.book-lent.v1' }); // at deployment, the same rights
      expect(errors).toHaveLength(1);
    } finally {
      await consumer.close(1000);
      await Promise.all([library.close(), billingPublisher.close()]);
    }
  });

  it("is refused the library's contract and everything of audit's consumer: no forged loan, no reading, purging, deleting or forging attempts of another's queue", async () => {
    const library = transportOf('library').createPublisher({ catalogue });
    await library // declares its exchange, whether or not its consumers subscribed yet
      .publish([bookLent()])
      .catch(() => {})
      .finally(() => library.close());
    await transportOf('audit').subscribe({ catalogue, consumer: 'audit.book-lent.v1' });
    const audit = queueOf({ prefix: 'idem' }, 'audit.book-lent.v1');
    const waiting = async () => {
      const admin = await connect(urlOf('admin'));
      try {
        return (await (await admin.createChannel()).checkQueue(audit)).messageCount;
      } finally {
        await admin.close();
      }
    };
    const before = await waiting(); // the loans above, which audit has not taken
    const loans = exchangeOf({ prefix: 'idem' }, 'library.book-lent.v1');
    const message = Buffer.from(JSON.stringify(bookLent()));

    const billing = transportOf('billing').createPublisher({ catalogue });
    await expect(billing.publish([bookLent()]).finally(() => billing.close())).rejects.toThrow(/ACCESS_REFUSED/);
    await expect(transportOf('billing').subscribe({ catalogue, consumer: 'audit.book-lent.v1' })).rejects.toThrow(
      /ACCESS_REFUSED/,
    );
    const model = await connect(urlOf('billing'));
    try {
      const refusals = {
        'publish a loan': (c: ConfirmChannel) => c.publish(loans, '', message),
        'delete the loans’ exchange': (c: ConfirmChannel) => c.deleteExchange(loans),
        "read audit's queue": (c: ConfirmChannel) => c.consume(audit, () => {}),
        "purge audit's queue": (c: ConfirmChannel) => c.purgeQueue(audit),
        "delete audit's queue": (c: ConfirmChannel) => c.deleteQueue(audit),
        "bind audit's queue": (c: ConfirmChannel) => c.bindQueue(audit, loans, ''),
        "write to audit's redelivery exchange (an attempt count of its own)": (c: ConfirmChannel) =>
          c.publish(redeliveryExchangeOf({ prefix: 'idem' }, 'audit.book-lent.v1'), '', message),
        "dead-letter into audit's redelivery exchange from a queue of its own": (c: ConfirmChannel) =>
          c.assertQueue(retryQueueOf({ prefix: 'idem' }, 'billing.book-lent.v1', 1), {
            arguments: {
              'x-message-ttl': 1,
              'x-dead-letter-exchange': redeliveryExchangeOf({ prefix: 'idem' }, 'audit.book-lent.v1'),
            },
          }),
        "send to audit's queue through the default exchange": (c: ConfirmChannel) => c.sendToQueue(audit, message),
      };
      for (const [what, step] of Object.entries(refusals))
        expect(`${what}: ${await refusedOn(model, step)}`).toMatch(/: .*ACCESS_REFUSED/);
    } finally {
      await model.close();
    }
    expect(await waiting()).toBe(before); // nothing forged into it
  });
});

/** What RabbitMQ said when it closed the channel `step` ran on, or that it did not close it. */
async function refusedOn(model: ChannelModel, step: (channel: ConfirmChannel) => unknown): Promise<string> {
  const channel = await model.createConfirmChannel();
  const closed = new Promise<string>((resolve) => channel.once('error', (error: Error) => resolve(error.message)));
  const ran = (async () => {
    await step(channel);
    await channel.waitForConfirms();
  })().catch(() => {});
  const answered = await Promise.race([
    closed,
    ran.then(() => new Promise<string>((resolve) => setTimeout(() => resolve('not refused'), 500))),
  ]);
  if (answered === 'not refused') await channel.close();
  return answered;
}
