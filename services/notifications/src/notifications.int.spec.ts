import { randomUUID } from 'node:crypto';
import { createServer as createHttpServer } from 'node:http';
import { connect, createServer } from 'node:net';
import type { Envelope } from '@idem/shop';
import { takeHere } from '@idem/database';
import { createInbox } from '@idem/inbox';
import { createLogger } from '@idem/runtime';
import { startSmtpSink, type SmtpSink } from '@idem/smtp-sink';
import {
  serviceDatabase,
  deleteQueues,
  orderPlacedMessage,
  uniqueName,
  waitFor,
  exited,
  held,
  startScript,
} from '@idem/testkit';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from './config.js';
import { PACKAGE_TABLES } from './tables.js';
import { handleOrderPlaced } from './consumers/order-placed.js';
import { handlePaymentCaptured } from './consumers/payment-captured.js';
import { connectDatabase } from './db.js';
import { createDispatcher, LeaseTooShortError } from './workers/dispatcher.js';
import { startNotifications } from './service.js';

const database = serviceDatabase('notifications', {
  root: new URL('../', import.meta.url),
  tables: PACKAGE_TABLES,
  connect: connectDatabase,
  hooks: { beforeAll, afterAll },
});
const { db } = database;
let sink: SmtpSink;
const now = () => new Date();

beforeAll(async () => {
  sink = await startSmtpSink({ smtpPort: 0, httpPort: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  await sink.close();
});
beforeEach(async () => {
  sink.clear();
  sink.failNext(0);
  sink.slowAnswers(0);
  await database.empty();
});

const inbox = (client = db) => createInbox({ db: client });
const smtpUrl = () => `smtp://127.0.0.1:${sink.smtpPort}`;
const dispatcher = (maxAttempts = 8): ReturnType<typeof createDispatcher> =>
  createDispatcher({
    db,
    smtpUrl: smtpUrl(),
    from: 'shop@idem.local',
    log: createLogger('notifications', 'silent'),
    maxAttempts,
    retryDelayMs: 1,
    leaseMs: 3_000,
    smtpTimeoutMs: 200,
  });
const captured = (orderId: string): Envelope<'payments.payment-captured.v1'> => ({
  ...orderPlacedMessage(),
  type: 'payments.payment-captured.v1',
  producer: 'payments',
  body: { orderId, paymentIntentId: 'pi_123', amountCents: 500, currency: 'eur' },
});
/** An order placed and paid, each delivered in one statement, as the runner delivers a message alone. */
const placeAndCapture = async (client = db) => {
  const order = orderPlacedMessage();
  await inbox(client).consumeInOneStatement('notifications.order-placed.v1', order, handleOrderPlaced({ now }));
  await inbox(client).consumeInOneStatement(
    'notifications.payment-captured.v1',
    captured(order.body.orderId),
    handlePaymentCaptured({ now }),
  );
  return order;
};

describe('notifications consumers', () => {
  it('queues one order-received email per order and sends nothing inside the transaction', async () => {
    const order = orderPlacedMessage();
    expect(await inbox().consume('notifications.order-placed.v1', order, handleOrderPlaced({ now }))).toEqual({
      outcome: 'processed',
    });
    expect(await inbox().consume('notifications.order-placed.v1', order, handleOrderPlaced({ now }))).toEqual({
      outcome: 'duplicate',
    });
    expect(await db.emailWorkItem.findMany()).toEqual([
      expect.objectContaining({
        businessKey: `order-received:${order.body.orderId}`,
        status: 'pending',
        toAddress: 'ada@example.com',
      }),
    ]);
    expect(await sink.messages()).toEqual([]);
  });

  it('keeps a receipt whose order has not arrived yet waiting, writes it when the order comes, and queues one receipt per order', async () => {
    const order = orderPlacedMessage();
    const early = captured(order.body.orderId);
    expect(await inbox().consume('notifications.payment-captured.v1', early, handlePaymentCaptured({ now }))).toEqual({
      outcome: 'processed',
    });
    expect(await db.emailWorkItem.findFirstOrThrow({ where: { kind: 'receipt' } })).toMatchObject({
      status: 'pending',
      subject: null,
      facts: early.body,
    });
    expect(await dispatcher().runOnce()).toBe(0); // not due yet: its order is not known
    await db.emailWorkItem.updateMany({ data: { nextAttemptAt: new Date(0) } });
    expect(await dispatcher().runOnce()).toBe(1); // looked at: still waiting, given back uncounted
    expect(await db.emailWorkItem.findFirstOrThrow({ where: { kind: 'receipt' } })).toMatchObject({
      attempts: 0,
      leaseOwner: null,
      nextAttemptAt: expect.any(Date),
    });
    await inbox().consume('notifications.order-placed.v1', order, handleOrderPlaced({ now }));
    expect(
      (await db.emailWorkItem.findFirstOrThrow({ where: { kind: 'receipt' } })).nextAttemptAt.getTime(),
    ).toBeLessThanOrEqual(Date.now()); // woken by the summary
    // A second capture message for the order (another message id): the business key holds.
    await inbox().consume(
      'notifications.payment-captured.v1',
      captured(order.body.orderId),
      handlePaymentCaptured({ now }),
    );
    expect(await db.emailWorkItem.count({ where: { kind: 'receipt' } })).toBe(1);
    await waitFor(async () => (await dispatcher().runOnce(), (await sink.messages()).length === 2));
    const receipt = (await sink.messages()).find((m) => m.Subject.startsWith('Receipt'))!;
    expect(receipt.Text).toContain('Your payment of €5.00 was captured.');
    expect(receipt.To.map((to) => to.Address)).toEqual(['ada@example.com']);
  });

  it('sends the receipt when its order-placed commits while the capture is held between reading the summary and writing the email', async () => {
    const order = orderPlacedMessage();
    const capturing = held(handlePaymentCaptured({ now }), { statements: 1 }); // read: no summary yet
    const early = inbox().consume('notifications.payment-captured.v1', captured(order.body.orderId), capturing.handler);
    await capturing.reached;
    await inbox().consume('notifications.order-placed.v1', order, handleOrderPlaced({ now })); // wakes nothing yet
    capturing.release();
    expect(await early).toEqual({ outcome: 'processed' });
    await waitFor(async () => (await dispatcher().runOnce(), (await sink.messages()).length === 2), {
      what: 'the order-received email and the receipt',
    });
    expect(await db.emailWorkItem.count({ where: { status: 'sent' } })).toBe(2);
  });

  /** What deliveries left about an order, without what twins differ in by nature (ids, the order's id). */
  async function leftAbout(orderId: string, at: Date, record: { consumer: string; messageId: string }) {
    const items = await db.emailWorkItem.findMany({ where: { orderId }, orderBy: { kind: 'asc' } });
    return JSON.stringify({
      summary: await db.orderSummary.findUnique({ where: { orderId } }),
      items: items.map(({ id, messageId, createdAt, updatedAt, nextAttemptAt, ...item }) => ({
        ...item,
        messageId: messageId === `<email-${id}@idem.local>`,
        written: [createdAt, updatedAt, nextAttemptAt].map((time) => time.getTime() === at.getTime()),
      })),
      recorded: await db.processedMessage.count({ where: record }),
    })
      .replaceAll(orderId, 'the order')
      .replaceAll(orderId.slice(0, 8), 'the order');
  }
  /** An order placed at `at`: twins differ only in their ids. */
  const placedAt = (at: Date) => ({ ...orderPlacedMessage(), occurredAt: at.toISOString() });

  it('ends an order-placed delivered in one statement as consume ends it: a first, a copy, another message about the order', async () => {
    const consumer = 'notifications.order-placed.v1';
    const at = new Date();
    const handler = handleOrderPlaced({ now: () => at });
    for (const before of ['nothing', 'the same message', 'another message about the order'] as const) {
      const seen: Record<string, string> = {};
      for (const way of ['oneStatement', 'plain'] as const) {
        const order = placedAt(at);
        if (before === 'the same message') await inbox().consume(consumer, order, handler);
        if (before === 'another message about the order')
          await inbox().consume(consumer, { ...order, messageId: randomUUID() }, handler);
        const outcome =
          way === 'oneStatement'
            ? await inbox().consumeInOneStatement(consumer, order, handler)
            : await inbox().consume(consumer, order, handler);
        seen[way] =
          `${outcome.outcome} ${await leftAbout(order.body.orderId, at, { consumer, messageId: order.messageId })}`;
      }
      expect(seen.oneStatement, before).toEqual(seen.plain);
    }
  });

  it('ends a receipt delivered in one statement as consume ends it: a first, an order not known yet, a copy, another message', async () => {
    const consumer = 'notifications.payment-captured.v1';
    const at = new Date();
    const handler = handlePaymentCaptured({ now: () => at });
    const cases = ['a first', 'an order not known yet', 'a copy', 'another message about the order'] as const;
    for (const before of cases) {
      const seen: Record<string, string> = {};
      for (const way of ['oneStatement', 'plain'] as const) {
        const order = placedAt(at);
        const { orderId } = order.body;
        if (before !== 'an order not known yet')
          await inbox().consume('notifications.order-placed.v1', order, handleOrderPlaced({ now: () => at }));
        const message = captured(orderId);
        if (before === 'a copy') await inbox().consume(consumer, message, handler);
        if (before === 'another message about the order')
          await inbox().consume(consumer, { ...message, messageId: randomUUID() }, handler);
        const outcome =
          way === 'oneStatement'
            ? await inbox().consumeInOneStatement(consumer, message, handler)
            : await inbox().consume(consumer, message, handler);
        seen[way] = `${outcome.outcome} ${await leftAbout(orderId, at, { consumer, messageId: message.messageId })}`;
      }
      expect(seen.oneStatement, before).toEqual(seen.plain);
    }
  });
});

describe('email dispatcher', () => {
  it('sends an email when its work item is written (LISTEN), not at its next poll', async () => {
    const listening = createDispatcher({
      db,
      smtpUrl: smtpUrl(),
      from: 'shop@idem.local',
      log: createLogger('notifications', 'silent'),
      databaseUrl: database.url,
      pollIntervalMs: 3_600_000, // a poll an hour away: only the item's notification wakes it
    });
    listening.start();
    // Written by another client (another process, as far as the dispatcher knows): not handed to it.
    const elsewhere = connectDatabase(database.url);
    try {
      const order = await placeAndCapture(elsewhere);
      await waitFor(
        async () => (await db.emailWorkItem.count({ where: { orderId: order.body.orderId, status: 'sent' } })) === 2,
        {
          what: 'both emails sent',
        },
      );
    } finally {
      await listening.stop();
      await elsewhere.$disconnect();
    }
  });

  it('takes the emails its own process writes at their commit: written leased to it, sent with no claim, notification or poll', async () => {
    const local = createDispatcher({
      db,
      smtpUrl: smtpUrl(),
      from: 'shop@idem.local',
      log: createLogger('notifications', 'silent'),
      pollIntervalMs: 3_600_000, // no LISTEN, and a poll an hour away: only the handover sends
      // A loaded machine must not fail the one send (nothing here would retry it): SMTP may stall 20 s.
      smtpTimeoutMs: 20_000,
      leaseMs: 90_000,
    });
    local.start();
    try {
      const order = await placeAndCapture();
      const sent = async () => db.emailWorkItem.findMany({ where: { orderId: order.body.orderId, status: 'sent' } });
      await waitFor(async () => (await sent()).length === 2, { what: 'both emails sent', timeoutMs: 45_000 }).catch(
        async (error: Error) => {
          const items = await db.emailWorkItem.findMany({ select: { kind: true, status: true, lastError: true } });
          throw new Error(`${error.message}; the items: ${JSON.stringify(items)}`);
        },
      );
      // As a claim leaves it: one attempt, the lease released by the mark.
      expect((await sent()).map((item) => [item.attempts, item.leaseOwner])).toEqual([
        [1, null],
        [1, null],
      ]);
      expect(await sink.messages()).toHaveLength(2);
    } finally {
      await local.stop();
    }
  });

  it('sends, once its lease has run out, an email its own dispatcher never took (the process died after the commit)', async () => {
    // The process's dispatcher as it is at a SIGKILL: the items were written leased to it, and nothing runs.
    const stopTaking = takeHere(db, 'email_work_items', { owner: 'a-dispatcher-that-died', leaseMs: 500, take() {} });
    try {
      await placeAndCapture();
    } finally {
      stopTaking();
    }
    expect(await db.emailWorkItem.count({ where: { leaseOwner: 'a-dispatcher-that-died' } })).toBe(2);
    expect(await dispatcher().runOnce()).toBe(0); // still leased
    let claimed = 0; // each lease runs out on its own (written a moment apart): one round may take one
    await waitFor(async () => (claimed += await dispatcher().runOnce()) === 2, { what: 'the claims after the leases' });
    expect((await db.emailWorkItem.findMany()).map((item) => item.status)).toEqual(['sent', 'sent']);
  });

  it('sends readable emails with the order lines and totals and a stable Message-ID, then marks them sent', async () => {
    const order = await placeAndCapture();
    expect(await dispatcher().runOnce()).toBe(2);
    const items = await db.emailWorkItem.findMany({ orderBy: { kind: 'asc' } });
    expect(items.map((i) => i.status)).toEqual(['sent', 'sent']);
    const receipt = (await sink.messages()).find((m) => m.Subject.startsWith('Receipt'))!;
    expect(`<${receipt.MessageID}>`).toBe(items.find((i) => i.kind === 'receipt')!.messageId);
    expect(receipt.Text).toContain(order.body.orderId);
    expect(receipt.Text).toContain('1 × sku-1 at €5.00 = €5.00');
    expect(receipt.Text).toContain('Total: €5.00');
    expect(receipt.HTML).toContain('<table');
    expect(await dispatcher().runOnce()).toBe(0);
  });

  it('sends once with two dispatchers and a server slower than their timeouts: the lease outlasts every wait', async () => {
    await inbox().consume('notifications.order-placed.v1', orderPlacedMessage(), handleOrderPlaced({ now }));
    sink.slowGreeting(1_000); // five times the dispatchers' SMTP timeout
    const [a, b] = [dispatcher(20), dispatcher(20)];
    try {
      const until = Date.now() + 2_500;
      while (Date.now() < until) await Promise.all([a.runOnce(), b.runOnce()]);
      expect(await db.emailWorkItem.findFirstOrThrow()).toMatchObject({
        status: 'pending',
        lastError: expect.stringMatching(/ETIMEDOUT|timeout/i),
      });
      sink.slowGreeting(0);
      await waitFor(async () => {
        await Promise.all([a.runOnce(), b.runOnce()]);
        return (await db.emailWorkItem.findFirstOrThrow()).status === 'sent';
      });
      // Give a late send from a dispatcher that had outlived its lease every chance to arrive.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(await sink.messages()).toHaveLength(1);
    } finally {
      sink.slowGreeting(0);
      await Promise.all([a.stop(), b.stop()]);
    }
  });

  it('refuses to start with a lease not longer than one send can take', () => {
    const tooShort = () =>
      createDispatcher({
        db,
        smtpUrl: smtpUrl(),
        from: 'shop@idem.local',
        log: createLogger('notifications', 'silent'),
        leaseMs: 30_000,
        smtpTimeoutMs: 10_000,
      });
    expect(tooShort).toThrow(LeaseTooShortError);
    expect(tooShort).toThrow(/DISPATCHER_LEASE_MS \(30000\) must be longer than .* = 30000 ms/);
  });

  it('sends each email once under a server slower than arrivals: no more sends under way than connections, the rest left unleased', async () => {
    // 100 emails committed at once in this process, a server taking 300 ms a message, 5
    // connections: 6 s of sending for a 5 s lease. Each item is leased only while its send can
    // start, so a second dispatcher polling beside it never finds a lease run out under a send.
    sink.slowAnswers(300);
    const settings = { smtpUrl: smtpUrl(), from: 'shop@idem.local', log: createLogger('notifications', 'silent') };
    const timing = { leaseMs: 5_000, smtpTimeoutMs: 400, smtpConnections: 5, pollIntervalMs: 100 };
    const elsewhere = connectDatabase(database.url);
    const [local, other] = [
      createDispatcher({ db, ...settings, ...timing }),
      createDispatcher({ db: elsewhere, ...settings, ...timing }),
    ];
    local.start();
    other.start();
    try {
      const orders = Array.from({ length: 100 }, () => orderPlacedMessage());
      await Promise.all(
        orders.map((order) => inbox().consume('notifications.order-placed.v1', order, handleOrderPlaced({ now }))),
      );
      await waitFor(async () => (await db.emailWorkItem.count({ where: { status: 'sent' } })) === 100, {
        timeoutMs: 60_000,
        what: '100 emails sent',
      });
      await new Promise((resolve) => setTimeout(resolve, 1_500)); // a late copy's chance to arrive
      const ids = (await sink.messages()).map((m) => m.MessageID);
      expect(ids).toHaveLength(100);
      expect(new Set(ids).size).toBe(100);
      expect(await db.emailWorkItem.aggregate({ _sum: { unconfirmedSends: true, leaseOverruns: true } })).toEqual({
        _sum: { unconfirmedSends: 0, leaseOverruns: 0 },
      });
    } finally {
      sink.slowAnswers(0);
      await Promise.all([local.stop(), other.stop()]);
      await elsewhere.$disconnect();
    }
  }, 90_000);

  it('drains a backlog at the pace of its connections, oldest first, with no poll between rounds', async () => {
    // 300 emails due when the dispatcher starts (written while notifications was away: nothing
    // will notify it of them) and its poll an hour away: a round that sleeps while any is still
    // due never ends the drain. The code before this claimed one round per free connection (5),
    // read a round short of its batch (20) as "all due taken" and slept its poll.
    const due = 300;
    for (let i = 0; i < due; i++)
      await inbox().consume('notifications.order-placed.v1', orderPlacedMessage(), handleOrderPlaced({ now }));
    const written = (await db.emailWorkItem.findMany({ orderBy: { nextAttemptAt: 'asc' } })).map((i) => i.messageId);
    const draining = createDispatcher({
      db,
      smtpUrl: smtpUrl(),
      from: 'shop@idem.local',
      log: createLogger('notifications', 'silent'),
      databaseUrl: database.url,
      pollIntervalMs: 3_600_000,
      smtpConnections: 5,
    });
    draining.start();
    try {
      await waitFor(async () => (await db.emailWorkItem.count({ where: { status: 'sent' } })) === due, {
        timeoutMs: 60_000,
        what: `${due} emails sent`,
      });
    } finally {
      await draining.stop();
    }
    // Oldest first: each email reached the server near where it was due. Five sends run side by
    // side and one that stalls (a busy machine) is passed by the others, so "near" is a tenth of
    // the backlog; any other order (newest first, or none) moves emails by a hundred places.
    const received = (await sink.messages()).map((m) => `<${m.MessageID}>`);
    expect(received).toHaveLength(due);
    const displacement = received.map((id, place) => Math.abs(written.indexOf(id) - place));
    expect(Math.max(...displacement)).toBeLessThan(due / 10);
  }, 90_000);

  it('counts a send whose connection dropped after the message went as unconfirmed: the server may have taken it', async () => {
    // A server that takes the whole message and hangs up instead of answering it.
    const hangingUp = createServer((socket) => {
      socket.write('220 hangs-up.test ESMTP\r\n');
      let data = false;
      let received = '';
      socket.on('data', (chunk: Buffer) => {
        received += chunk.toString();
        if (data) {
          if (received.includes('\r\n.\r\n')) socket.destroy();
          return;
        }
        for (const line of received.split('\r\n').slice(0, -1)) {
          if (/^(EHLO|HELO)/i.test(line)) socket.write('250 hangs-up.test\r\n');
          else if (/^(MAIL|RCPT)/i.test(line)) socket.write('250 OK\r\n');
          else if (/^DATA/i.test(line)) {
            socket.write('354 go on\r\n');
            data = true;
          }
        }
        received = data ? '' : received.slice(received.lastIndexOf('\r\n') + 2);
      });
    });
    await new Promise<void>((resolve) => hangingUp.listen(0, '127.0.0.1', resolve));
    try {
      await inbox().consume('notifications.order-placed.v1', orderPlacedMessage(), handleOrderPlaced({ now }));
      const dispatcher_ = createDispatcher({
        db,
        smtpUrl: `smtp://127.0.0.1:${(hangingUp.address() as { port: number }).port}`,
        from: 'shop@idem.local',
        log: createLogger('notifications', 'silent'),
        leaseMs: 3_000,
        smtpTimeoutMs: 500,
      });
      await dispatcher_.runOnce();
      await dispatcher_.stop();
      expect(await db.emailWorkItem.findFirstOrThrow()).toMatchObject({ status: 'pending', unconfirmedSends: 1 });
    } finally {
      hangingUp.close();
    }
  });

  describe('a send whose reply was lost after the message went (a proxy drops the 250)', () => {
    /**
     * A TCP proxy in front of the sink that, while `loseReplies` > 0, drops the server's reply to a
     * message's final dot and cuts that connection: the sink has stored the message, the
     * dispatcher never hears so.
     */
    async function replyLosingProxy() {
      const proxy = { loseReplies: 0, port: 0, close: async () => {} };
      const server = createServer((client) => {
        const upstream = connect(sink.smtpPort, '127.0.0.1');
        let messageEnded = false;
        const cut = () => {
          client.destroy();
          upstream.destroy();
        };
        client.on('data', (chunk: Buffer) => {
          if (proxy.loseReplies > 0 && chunk.toString('latin1').endsWith('\r\n.\r\n')) messageEnded = true;
          upstream.write(chunk);
        });
        upstream.on('data', (chunk: Buffer) => {
          if (!messageEnded) return void client.write(chunk);
          proxy.loseReplies -= 1;
          cut(); // the 250 goes nowhere
        });
        client.on('error', cut).on('close', cut);
        upstream.on('error', cut).on('close', cut);
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      proxy.port = (server.address() as { port: number }).port;
      proxy.close = () => new Promise((resolve) => server.close(() => resolve()));
      return proxy;
    }

    const throughProxy = (port: number, lookupUrl?: string, maxAttempts?: number) =>
      createDispatcher({
        db,
        smtpUrl: `smtp://127.0.0.1:${port}`,
        ...(lookupUrl ? { lookupUrl } : {}),
        ...(maxAttempts ? { maxAttempts } : {}),
        from: 'shop@idem.local',
        log: createLogger('notifications', 'silent'),
        retryDelayMs: 1,
        leaseMs: 3_000,
        smtpTimeoutMs: 500,
      });

    /** One email sent through the proxy with its reply lost, then dispatched until it ends sent or `until` says. */
    async function lostReplyThen(lookupUrl: string | undefined, until = async () => false, maxAttempts?: number) {
      const proxy = await replyLosingProxy();
      const dispatcher_ = throughProxy(proxy.port, lookupUrl, maxAttempts);
      try {
        await inbox().consume('notifications.order-placed.v1', orderPlacedMessage(), handleOrderPlaced({ now }));
        proxy.loseReplies = 1;
        await dispatcher_.runOnce();
        expect(proxy.loseReplies).toBe(0); // the reply was lost
        expect(await sink.messages()).toHaveLength(1); // and the message stored
        expect(await db.emailWorkItem.findFirstOrThrow()).toMatchObject({ status: 'pending', unconfirmedSends: 1 });
        await waitFor(
          async () => (
            await dispatcher_.runOnce(),
            (await until()) || (await db.emailWorkItem.findFirstOrThrow()).status === 'sent'
          ),
          { what: 'the next attempt' },
        );
      } finally {
        await dispatcher_.stop();
        await proxy.close();
      }
      return db.emailWorkItem.findFirstOrThrow();
    }

    it('asks the provider before sending again, finds the message, and marks the item sent: the email is stored once', async () => {
      const item = await lostReplyThen(`http://127.0.0.1:${sink.httpPort}`);
      expect(item).toMatchObject({ status: 'sent', unconfirmedSends: 1, reconciledSends: 1 });
      expect((await sink.messages()).map((m) => `<${m.MessageID}>`)).toEqual([item.messageId]);
    });

    it('sends it again without a lookup: two copies under one Message-ID, counted as an unconfirmed send', async () => {
      const item = await lostReplyThen(undefined);
      expect(item).toMatchObject({ status: 'sent', unconfirmedSends: 1, reconciledSends: 0 });
      expect((await sink.messages()).map((m) => `<${m.MessageID}>`)).toEqual([item.messageId, item.messageId]);
    });

    it('sends nothing again while the provider cannot be asked: the attempt fails and is retried', async () => {
      const unanswered = createServer((socket) => socket.destroy());
      await new Promise<void>((resolve) => unanswered.listen(0, '127.0.0.1', resolve));
      try {
        const lookupUrl = `http://127.0.0.1:${(unanswered.address() as { port: number }).port}`;
        const item = await lostReplyThen(
          lookupUrl,
          async () => (await db.emailWorkItem.findFirstOrThrow()).attempts >= 3,
        );
        expect(item).toMatchObject({ status: 'pending', unconfirmedSends: 1, reconciledSends: 0 });
        expect(item.lastError).toMatch(/lookup/);
        expect(await sink.messages()).toHaveLength(1);
      } finally {
        unanswered.close();
      }
    });

    it('sends it on the last attempt rather than park it while the provider cannot be asked, the copy counted', async () => {
      const unanswered = createServer((socket) => socket.destroy());
      await new Promise<void>((resolve) => unanswered.listen(0, '127.0.0.1', resolve));
      try {
        const lookupUrl = `http://127.0.0.1:${(unanswered.address() as { port: number }).port}`;
        const item = await lostReplyThen(lookupUrl, undefined, 3);
        expect(item).toMatchObject({ status: 'sent', attempts: 3, unconfirmedSends: 1, reconciledSends: 0 });
        expect((await sink.messages()).map((m) => `<${m.MessageID}>`)).toEqual([item.messageId, item.messageId]);
      } finally {
        unanswered.close();
      }
    });

    it('sends it again, the copy counted, where the provider offers no search (404)', async () => {
      const searchless = createHttpServer((_req, res) => res.writeHead(404).end());
      await new Promise<void>((resolve) => searchless.listen(0, '127.0.0.1', resolve));
      try {
        const item = await lostReplyThen(`http://127.0.0.1:${(searchless.address() as { port: number }).port}`);
        expect(item).toMatchObject({ status: 'sent', unconfirmedSends: 1, reconciledSends: 0 });
        expect((await sink.messages()).map((m) => `<${m.MessageID}>`)).toEqual([item.messageId, item.messageId]);
      } finally {
        searchless.close();
      }
    });
  });

  it('retries a temporary SMTP failure and sends once it passes', async () => {
    await inbox().consume('notifications.order-placed.v1', orderPlacedMessage(), handleOrderPlaced({ now }));
    sink.failNext(1);
    await dispatcher().runOnce();
    expect(await db.emailWorkItem.findFirstOrThrow()).toMatchObject({
      status: 'pending',
      attempts: 1,
      lastError: expect.stringContaining('451'),
    });
    await waitFor(async () => (await dispatcher().runOnce()) === 1);
    expect(await db.emailWorkItem.findFirstOrThrow()).toMatchObject({ status: 'sent', attempts: 2 });
    expect(await sink.messages()).toHaveLength(1);
  });

  it('marks an item dead after the configured number of attempts, visibly', async () => {
    await inbox().consume('notifications.order-placed.v1', orderPlacedMessage(), handleOrderPlaced({ now }));
    sink.failNext(10);
    await dispatcher(2).runOnce();
    await waitFor(async () => (await dispatcher(2).runOnce()) === 1);
    expect(await db.emailWorkItem.findFirstOrThrow()).toMatchObject({ status: 'parked', attempts: 2 });
    expect(await dispatcher(2).runOnce()).toBe(0);
  });

  it('ends sent with at most one extra copy, under the same Message-ID, when SIGKILLed after the server accepted', async () => {
    const order = orderPlacedMessage();
    await inbox().consume('notifications.order-placed.v1', order, handleOrderPlaced({ now }));
    const child = startScript(new URL('../test/dispatcher-process.ts', import.meta.url), {
      DATABASE_URL: database.url,
      SMTP_URL: smtpUrl(),
      IDEM_FAULTS_ENABLED: '1',
      IDEM_FAULTS: 'crash-after-send count=1',
    });
    expect(await exited(child)).toBe('SIGKILL');
    expect(await db.emailWorkItem.findFirstOrThrow()).toMatchObject({ status: 'pending' });

    await waitFor(async () => (await dispatcher().runOnce()) === 1); // after the dead dispatcher's lease
    const item = await db.emailWorkItem.findFirstOrThrow();
    expect(item.status).toBe('sent');
    const copies = await sink.messages();
    expect(copies).toHaveLength(2);
    expect(new Set(copies.map((m) => `<${m.MessageID}>`))).toEqual(new Set([item.messageId]));
  });
});

describe('GET /emails', () => {
  it('lists the email work items of an order, to the operator only', async () => {
    const ADMIN_TOKEN = 'test-admin-token-0123456789';
    const operator = { authorization: `Bearer ${ADMIN_TOKEN}` };
    const prefix = uniqueName('idem_test_notifications');
    const service = await startNotifications(
      loadConfig({
        DATABASE_URL: database.url,
        IDEM_QUEUE_PREFIX: prefix,
        PORT: '0',
        LOG_LEVEL: 'silent',
        IDEM_ROLES: 'http',
        ADMIN_TOKEN,
      }),
    );
    const emails = (query: string, headers: Record<string, string> = operator) =>
      fetch(`http://127.0.0.1:${service.http.port}/emails${query}`, { headers });
    try {
      const order = await placeAndCapture();
      expect((await emails(`?orderId=${order.body.orderId}`, {})).status).toBe(401);
      expect((await emails(`?orderId=${order.body.orderId}`, { authorization: 'Bearer wrong' })).status).toBe(403);
      const res = await emails(`?orderId=${order.body.orderId}`);
      const body = (await res.json()) as { emails: { kind: string; status: string }[] };
      expect(body.emails.map((e) => [e.kind, e.status])).toEqual([
        ['order-received', 'pending'],
        ['receipt', 'pending'],
      ]);
      // A receipt whose order is not known here yet: listed, with no address or subject so far.
      const early = randomUUID();
      await inbox().consume('notifications.payment-captured.v1', captured(early), handlePaymentCaptured({ now }));
      const waiting = await emails(`?orderId=${early}`);
      expect(waiting.status).toBe(200);
      expect(((await waiting.json()) as { emails: unknown[] }).emails).toEqual([
        expect.objectContaining({ kind: 'receipt', status: 'pending', to: null, subject: null }),
      ]);
      expect((await emails(`?orderId=${randomUUID()}`)).status).toBe(200);
      expect((await emails('')).status).toBe(400);
    } finally {
      await service.stop();
      await deleteQueues(prefix);
    }
  });
});
