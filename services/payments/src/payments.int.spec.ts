import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import { createServer } from 'node:net';
import type { Envelope } from '@idem/shop';
import { createInbox } from '@idem/inbox';
import { createLogger } from '@idem/runtime';
import { createStripeSimulator } from '@idem/stripe-sim';
import { noFaults } from '@idem/faults';
import {
  serviceDatabase,
  deleteQueues,
  exited,
  finishedOrWaiting,
  held,
  orderPlacedMessage,
  startScript,
  uniqueName,
  waitFor,
} from '@idem/testkit';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { handleOrderCancelled } from './consumers/order-cancelled.js';
import { handleStockReserved } from './consumers/stock-reserved.js';
import { connectDatabase, type PrismaClient } from './db.js';
import { recordCharge, recordFinalAnswer } from './application/provider-answers.js';
import { retryAttempt } from './application/payment-attempts.js';
import { loadConfig, SIMULATOR_API_KEY } from './config.js';
import { PACKAGE_TABLES } from './tables.js';
import { createPaymentWorker } from './workers/payment-worker.js';
import { startPayments } from './service.js';
import { newChargeKey } from './domain/payment-attempt.js';
import { createStripeClient } from './providers/stripe.js';
import type Stripe from 'stripe';

const simulator = createStripeSimulator();
let server: Server;
let apiBase: string;
const database = serviceDatabase('payments', {
  root: new URL('../', import.meta.url),
  tables: PACKAGE_TABLES,
  connect: connectDatabase,
  hooks: { beforeAll, afterAll },
});
const { db } = database;
const now = () => new Date();

beforeAll(async () => {
  server = await new Promise<Server>((resolve) => {
    const s = simulator.app.listen(0, '127.0.0.1', () => resolve(s));
  });
  apiBase = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});
beforeEach(async () => {
  simulator.reset();
  simulator.setFaults({ errorAfterCreate: 0, dropAfterCreate: 0 });
  await database.empty();
});

const inbox = () => createInbox({ db });
/** A worker; with another `apiKey` than the simulator's, one whose integration is broken (the provider refuses its key). */
const worker = (apiKey: string = SIMULATOR_API_KEY) =>
  createPaymentWorker({
    db,
    stripe: createStripeClient({ apiKey, apiBase }),
    log: createLogger('payments', 'silent'),
    retryDelayMs: 1,
    leaseMs: 300,
    searchLagMs: 1, // the simulator's search is up to date at once
  });

function stockReserved(
  orderId: string = randomUUID(),
  method = 'pm_card_visa',
): Envelope<'inventory.stock-reserved.v1'> {
  return {
    ...orderPlacedMessage(),
    type: 'inventory.stock-reserved.v1',
    producer: 'inventory',
    aggregateId: orderId,
    body: {
      orderId,
      lines: [{ sku: 'keyboard', quantity: 1 }],
      payment: { amountCents: 4999, currency: 'eur', method },
    },
  };
}
function orderCancelled(orderId: string): Envelope<'orders.order-cancelled.v1'> {
  return {
    ...orderPlacedMessage(),
    type: 'orders.order-cancelled.v1',
    aggregateId: orderId,
    aggregateVersion: 3,
    body: { orderId, reason: 'changed my mind' },
  };
}
const reserve = (message: Envelope<'inventory.stock-reserved.v1'>) =>
  inbox().consume('payments.stock-reserved.v1', message, handleStockReserved({ now }));
const cancel = (orderId: string) =>
  inbox().consume('payments.order-cancelled.v1', orderCancelled(orderId), handleOrderCancelled({ now }));
const attemptOf = (orderId: string) => db.paymentAttempt.findUniqueOrThrow({ where: { orderId } });
const eventsOf = async () =>
  (await db.outboxMessage.findMany({ orderBy: { position: 'asc' } })).map((m) => m.envelope as Envelope);
const intentsFor = (orderId: string) => simulator.paymentIntents().filter((p) => p.metadata.order_id === orderId);

/** A provider that takes each request and hangs up without an answer: whether it charged is unknown. */
async function silentProvider(): Promise<{ apiBase: string; close(): Promise<void> }> {
  const silent = createServer((socket) => socket.on('data', () => socket.destroy()));
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  return {
    apiBase: `http://127.0.0.1:${(silent.address() as { port: number }).port}`,
    close: () => new Promise((resolve) => silent.close(() => resolve())),
  };
}

describe('payments.stock-reserved.v1', () => {
  it('creates one attempt per order with a persisted provider key and calls no provider', async () => {
    const message = stockReserved();
    expect(await reserve(message)).toEqual({ outcome: 'processed' });
    expect(await reserve(message)).toEqual({ outcome: 'duplicate' });
    // Another message about the same order (the business key): no second attempt.
    expect(await reserve({ ...stockReserved(message.body.orderId), messageId: randomUUID() })).toEqual({
      outcome: 'processed',
    });
    const attempts = await db.paymentAttempt.findMany();
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({
      status: 'pending',
      providerCalls: 0,
      idempotencyKey: expect.stringMatching(/^charge-/),
    });
    expect(simulator.paymentIntents()).toEqual([]);
  });

  it('charges nothing for an order cancelled before its stock was reserved', async () => {
    const message = stockReserved();
    await cancel(message.body.orderId);
    expect(await reserve(message)).toMatchObject({ outcome: 'stale' });
    expect(await db.paymentAttempt.count()).toBe(0);
  });
});

describe('payment worker', () => {
  it('charges an attempt when it is written (LISTEN), not at its next poll', async () => {
    const listening = createPaymentWorker({
      db,
      stripe: createStripeClient({ apiKey: SIMULATOR_API_KEY, apiBase }),
      log: createLogger('payments', 'silent'),
      databaseUrl: database.url,
      pollIntervalMs: 3_600_000, // a poll an hour away: only the attempt's notification wakes it
    });
    listening.start();
    try {
      const message = stockReserved();
      await reserve(message);
      await waitFor(async () => (await attemptOf(message.body.orderId)).status === 'captured', {
        what: 'the attempt charged',
      });
      expect(intentsFor(message.body.orderId)).toHaveLength(1);
    } finally {
      await listening.stop();
    }
  });

  it('charges with the persisted key and records the capture and its event together', async () => {
    const message = stockReserved();
    await reserve(message);
    expect(await worker().runOnce()).toBe(1);
    const attempt = await attemptOf(message.body.orderId);
    const [intent] = intentsFor(message.body.orderId);
    expect(attempt).toMatchObject({ status: 'captured', paymentIntentId: intent!.id, leaseOwner: null });
    expect(await eventsOf()).toEqual([
      expect.objectContaining({
        type: 'payments.payment-captured.v1',
        correlationId: message.correlationId,
        causationId: message.messageId,
        body: { orderId: message.body.orderId, paymentIntentId: intent!.id, amountCents: 4999, currency: 'eur' },
      }),
    ]);
  });

  it('records a decline as final and publishes payment-failed', async () => {
    const message = stockReserved(randomUUID(), 'pm_card_chargeDeclined');
    await reserve(message);
    await worker().runOnce();
    expect(await attemptOf(message.body.orderId)).toMatchObject({ status: 'failed', failureCode: 'card_declined' });
    expect(await eventsOf()).toEqual([
      expect.objectContaining({
        type: 'payments.payment-failed.v1',
        body: expect.objectContaining({ code: 'card_declined' }),
      }),
    ]);
    expect(await worker().runOnce()).toBe(0);
  });

  it("fails the payment of a method the provider does not know: the customer's mistake, told with the provider's words", async () => {
    // An unknown payment method: Stripe answers 400 invalid_request_error (resource_missing, param payment_method).
    const message = stockReserved(randomUUID(), 'pm_card_unknown');
    await reserve(message);
    await worker().runOnce();
    expect(await attemptOf(message.body.orderId)).toMatchObject({
      status: 'failed',
      failureCode: 'resource_missing',
      failureReason: "No such PaymentMethod: 'pm_card_unknown'",
    });
    // The order fails and its stock goes back (orders and inventory consume payment-failed).
    expect(await eventsOf()).toEqual([
      expect.objectContaining({
        type: 'payments.payment-failed.v1',
        body: {
          orderId: message.body.orderId,
          code: 'resource_missing',
          reason: "No such PaymentMethod: 'pm_card_unknown'",
        },
      }),
    ]);
    expect(await worker().runOnce()).toBe(0);
  });

  it('parks an attempt the provider refuses for a fault of the integration (a key it does not accept), telling the order nothing', async () => {
    const message = stockReserved();
    await reserve(message);
    await worker('sk_test_not_the_simulators_key').runOnce();
    expect(await attemptOf(message.body.orderId)).toMatchObject({
      status: 'parked',
      failureCode: 'authentication_error',
      failureReason: expect.stringContaining('Invalid API Key provided'),
    });
    expect(await eventsOf()).toEqual([]); // no payment-failed: the card was never judged
    expect(await worker().runOnce()).toBe(0); // not retried on its own

    // A cancel (the reservation's expiry or the customer's) charges nothing: the provider created nothing.
    await cancel(message.body.orderId);
    expect(await attemptOf(message.body.orderId)).toMatchObject({ status: 'cancelled' });
  });

  it('charges with automatic payment methods and no redirects, as Stripe requires for a server-side confirm', async () => {
    const message = stockReserved();
    await reserve(message);
    await worker().runOnce();
    expect(await attemptOf(message.body.orderId)).toMatchObject({ status: 'captured' });
    // The simulator enforces Stripe's rule; without the parameter this charge would be refused.
    expect(intentsFor(message.body.orderId)).toHaveLength(1);
  });

  it('retries a provider failure with the same key and ends with one PaymentIntent', async () => {
    const message = stockReserved();
    await reserve(message);
    simulator.setFaults({ errorAfterCreate: 1 });
    await worker().runOnce();
    expect(await attemptOf(message.body.orderId)).toMatchObject({
      status: 'pending',
      providerCalls: 1,
      lastError: expect.any(String),
    });
    simulator.setFaults({ errorAfterCreate: 0 });
    await waitFor(async () => (await worker().runOnce()) === 1);
    expect(await attemptOf(message.body.orderId)).toMatchObject({ status: 'captured', providerCalls: 2 });
    expect(intentsFor(message.body.orderId)).toHaveLength(1);
  });

  it('reads a payment that is processing (a bank debit) by its id until it ends, never creating another', async () => {
    const message = stockReserved(randomUUID(), 'pm_usBankAccount');
    await reserve(message);
    await worker().runOnce();
    const processing = await attemptOf(message.body.orderId);
    expect(processing).toMatchObject({ status: 'pending', lastError: expect.stringContaining('processing') });
    expect(processing.paymentIntentId).toMatch(/^pi_/);
    expect(await eventsOf()).toEqual([]);

    await waitFor(async () => {
      await worker().runOnce();
      return (await attemptOf(message.body.orderId)).status === 'captured';
    });
    expect(await attemptOf(message.body.orderId)).toMatchObject({ paymentIntentId: processing.paymentIntentId });
    expect(intentsFor(message.body.orderId)).toHaveLength(1);
    expect((await eventsOf()).map((e) => e.type)).toEqual(['payments.payment-captured.v1']);
  });

  describe('a key the provider may have forgotten (about 24 hours)', () => {
    const HOUR = 3_600_000;
    const workerAt = (clock: () => number, apiBase_ = apiBase) =>
      createPaymentWorker({
        db,
        stripe: createStripeClient({ apiKey: SIMULATOR_API_KEY, apiBase: apiBase_, timeoutMs: 2_000 }),
        log: createLogger('payments', 'silent'),
        now: () => new Date(clock()),
        retryDelayMs: 1,
        leaseMs: 10_000,
      });

    it('is never sent again: the payment the first call made is found by its attempt id and recorded', async () => {
      let clock = Date.now();
      const message = stockReserved();
      await inbox().consume('payments.stock-reserved.v1', message, handleStockReserved({ now: () => new Date(clock) }));
      simulator.setFaults({ errorAfterCreate: 1 }); // charged, but the answer is lost
      await workerAt(() => clock).runOnce();
      simulator.setFaults({ errorAfterCreate: 0 });
      expect(await attemptOf(message.body.orderId)).toMatchObject({ status: 'pending' });

      clock += 13 * HOUR; // past the key's use; Stripe forgets it after about 24 hours
      simulator.expireIdempotencyKeys();
      await workerAt(() => clock).runOnce();
      const attempt = await attemptOf(message.body.orderId);
      expect(attempt).toMatchObject({ status: 'captured' });
      expect(intentsFor(message.body.orderId).map((p) => p.id)).toEqual([attempt.paymentIntentId]);
    });

    it('gets a new key only when the provider has no payment for it, asked once its search caught up', async () => {
      let clock = Date.now();
      const message = stockReserved();
      await inbox().consume('payments.stock-reserved.v1', message, handleStockReserved({ now: () => new Date(clock) }));
      const { idempotencyKey } = await attemptOf(message.body.orderId);
      clock += 12 * HOUR + 58 * 60_000;
      const silent = await silentProvider();
      await workerAt(() => clock, silent.apiBase).runOnce(); // the call may have reached it: no answer
      await silent.close();
      clock += 2 * 60_000; // the key is too old now, but the last call was two minutes ago
      await workerAt(() => clock).runOnce();
      expect(await attemptOf(message.body.orderId)).toMatchObject({ status: 'pending', idempotencyKey });

      clock += 5 * 60_000;
      await workerAt(() => clock).runOnce(); // the search finds nothing: a new key
      const renewed = await attemptOf(message.body.orderId);
      expect(renewed.idempotencyKey).not.toBe(idempotencyKey);
      expect(renewed.idempotencyKeyCreatedAt.getTime()).toBe(clock);

      await workerAt(() => clock).runOnce();
      expect(await attemptOf(message.body.orderId)).toMatchObject({ status: 'captured' });
      expect(intentsFor(message.body.orderId)).toHaveLength(1);
    });
  });

  describe('lesson: a new provider key per try', () => {
    // Stripe created the charge, then the answer was lost (a 500 after the create, the
    // simulator's fault): the worker cannot tell whether it charged, and tries again later.
    // (A dropped connection would not show it: stripe-node retries that once itself, with
    // the key it was given.)
    /**
     * WRONG WAY: a provider client that makes a key of its own for every call (as a wrapper that
     * "adds idempotency keys" might), instead of sending the one persisted with the attempt.
     */
    const keyPerTry = (stripe: Stripe): Stripe => {
      const create = stripe.paymentIntents.create.bind(stripe.paymentIntents);
      stripe.paymentIntents.create = ((params: Stripe.PaymentIntentCreateParams, options?: Stripe.RequestOptions) =>
        create(params, { ...options, idempotencyKey: newChargeKey() })) as typeof create;
      return stripe;
    };

    const chargeAcrossALostAnswer = async (way: 'wrong' | 'right') => {
      const message = stockReserved();
      await reserve(message);
      const stripe = createStripeClient({ apiKey: SIMULATOR_API_KEY, apiBase });
      const retrying = createPaymentWorker({
        db,
        stripe: way === 'wrong' ? keyPerTry(stripe) : stripe,
        log: createLogger('payments', 'silent'),
        retryDelayMs: 1,
      });
      simulator.setFaults({ errorAfterCreate: 1 });
      await retrying.runOnce();
      simulator.setFaults({ errorAfterCreate: 0 });
      await waitFor(async () => {
        await retrying.runOnce();
        return (await attemptOf(message.body.orderId)).status === 'captured';
      });
      return intentsFor(message.body.orderId);
    };

    it('the wrong way (a key per try) charges the customer twice', async () => {
      expect(await chargeAcrossALostAnswer('wrong')).toHaveLength(2);
    });

    it('the right way, the persisted key, charges once under the same fault', async () => {
      expect(await chargeAcrossALostAnswer('right')).toHaveLength(1);
    });
  });

  it('charges once when the worker is SIGKILLed after the provider answered and before recording', async () => {
    const message = stockReserved();
    await reserve(message);
    const child = startScript(new URL('../test/worker-process.ts', import.meta.url), {
      DATABASE_URL: database.url,
      STRIPE_API_BASE: apiBase,
      IDEM_FAULTS_ENABLED: '1',
      IDEM_FAULTS: 'crash-after-provider-call count=1',
    });
    expect(await exited(child)).toBe('SIGKILL');
    expect(intentsFor(message.body.orderId)).toHaveLength(1); // the provider charged
    expect(await attemptOf(message.body.orderId)).toMatchObject({ status: 'pending' }); // nothing recorded

    // Once the dead worker's lease expires another one calls again with the same key.
    await waitFor(async () => (await worker().runOnce()) === 1);
    const attempt = await attemptOf(message.body.orderId);
    expect(attempt).toMatchObject({ status: 'captured', providerCalls: 2 });
    expect(intentsFor(message.body.orderId).map((p) => p.id)).toEqual([attempt.paymentIntentId]);
  });
});

describe('payments.order-cancelled.v1', () => {
  it('refunds a captured payment exactly once, with its own persisted key', async () => {
    const message = stockReserved();
    await reserve(message);
    await worker().runOnce();
    expect(await cancel(message.body.orderId)).toEqual({ outcome: 'processed' });
    expect(await cancel(message.body.orderId)).toEqual({ outcome: 'processed' }); // another cancel message: nothing new
    expect(await attemptOf(message.body.orderId)).toMatchObject({
      status: 'refund_pending',
      refundIdempotencyKey: expect.stringMatching(/^refund-/),
    });
    await worker().runOnce();
    await worker().runOnce();
    const attempt = await attemptOf(message.body.orderId);
    expect(attempt).toMatchObject({ status: 'refunded', refundId: expect.stringMatching(/^re_/) });
    expect(simulator.refunds()).toHaveLength(1);
    expect((await eventsOf()).map((e) => e.type)).toEqual([
      'payments.payment-captured.v1',
      'payments.payment-refunded.v1',
    ]);
  });

  it('cancels a payment that never reached the provider', async () => {
    const message = stockReserved();
    await reserve(message);
    await cancel(message.body.orderId);
    expect(await attemptOf(message.body.orderId)).toMatchObject({ status: 'cancelled' });
    expect(await worker().runOnce()).toBe(0);
    expect(simulator.paymentIntents()).toEqual([]);
  });

  it('refunds a charge that completed after the cancel arrived', async () => {
    const message = stockReserved();
    await reserve(message);
    simulator.setFaults({ errorAfterCreate: 1 }); // charged, but the worker does not know yet
    await worker().runOnce();
    simulator.setFaults({ errorAfterCreate: 0 });
    await cancel(message.body.orderId);
    expect(await attemptOf(message.body.orderId)).toMatchObject({
      status: 'pending',
      cancelRequestedAt: expect.any(Date),
    });
    await waitFor(
      async () => (await attemptOf(message.body.orderId)).status === 'refunded' || (await worker().runOnce(), false),
    );
    expect(simulator.refunds()).toHaveLength(1);
    expect(intentsFor(message.body.orderId)).toHaveLength(1);
  });
});

describe('a cancellation while the provider is away (no call after the cancel commits)', () => {
  /** A provider address that refuses every connection: the request never leaves. */
  const refusing = 'http://127.0.0.1:1';
  const workerOn = (base: string) =>
    createPaymentWorker({
      db,
      stripe: createStripeClient({ apiKey: SIMULATOR_API_KEY, apiBase: base, timeoutMs: 500 }),
      log: createLogger('payments', 'silent'),
      retryDelayMs: 1,
      leaseMs: 2_000,
      searchLagMs: 1,
    });
  const runUntilEnded = (orderId: string) =>
    waitFor(async () => {
      await worker().runOnce();
      return !['pending', 'refund_pending'].includes((await attemptOf(orderId)).status);
    });

  it('cancels an attempt whose calls were all refused a connection, and the provider is never called', async () => {
    const message = stockReserved();
    await reserve(message);
    await workerOn(refusing).runOnce();
    await workerOn(refusing).runOnce(); // twice refused: two calls that reached nobody
    expect(await attemptOf(message.body.orderId)).toMatchObject({ status: 'pending', providerCalls: 0 });
    await cancel(message.body.orderId);
    expect(await attemptOf(message.body.orderId)).toMatchObject({ status: 'cancelled' });
    await worker().runOnce();
    expect(intentsFor(message.body.orderId)).toEqual([]);
  });

  it('makes no new call after a cancel that found a call with a lost answer: it looks the payment up, and cancels when there is none', async () => {
    const silent = await silentProvider();
    try {
      const message = stockReserved();
      await reserve(message);
      await workerOn(silent.apiBase).runOnce(); // the request may have reached it: unknown
      expect(await attemptOf(message.body.orderId)).toMatchObject({ status: 'pending', providerCalls: 1 });
      await cancel(message.body.orderId);
      expect(await attemptOf(message.body.orderId)).toMatchObject({
        status: 'pending',
        cancelRequestedAt: expect.any(Date),
      });
      await runUntilEnded(message.body.orderId);
      expect(await attemptOf(message.body.orderId)).toMatchObject({ status: 'cancelled', paymentIntentId: null });
      expect(intentsFor(message.body.orderId)).toEqual([]);
    } finally {
      await silent.close();
    }
  });

  it('ends a cancelled attempt that the provider then refuses as cancelled, not parked, and an operator cannot retry it', async () => {
    const message = stockReserved();
    await reserve(message);
    const { orderId } = message.body;
    await db.paymentAttempt.update({ where: { orderId }, data: { providerCalls: 1, leaseOwner: 'a-worker' } });
    const underWay = await attemptOf(orderId);
    await cancel(orderId); // the call is under way: the cancel marks it
    const recorder = { db, log: createLogger('payments', 'silent'), now, retryDelayMs: 1 };
    await recordCharge(recorder, underWay, { kind: 'rejected', code: 'api_key_expired', reason: 'Expired API Key' });
    expect(await attemptOf(orderId)).toMatchObject({ status: 'cancelled', failureCode: 'api_key_expired' });
    expect(await retryAttempt(db, underWay.id, now())).toBe('not_parked');
    await worker().runOnce();
    expect(intentsFor(orderId)).toEqual([]);
  });

  it('lets an operator retry a parked attempt only while its order is to be paid', async () => {
    const parkedFor = async () => {
      const message = stockReserved();
      await reserve(message);
      await worker('sk_test_not_the_simulators_key').runOnce();
      return attemptOf(message.body.orderId);
    };
    const open = await parkedFor();
    expect(open.status).toBe('parked');
    expect(await retryAttempt(db, open.id, now())).toBe('retried');
    const cancelled = await parkedFor();
    await cancel(cancelled.orderId);
    expect(await retryAttempt(db, cancelled.id, now())).toBe('not_parked');
    expect(await attemptOf(cancelled.orderId)).toMatchObject({ status: 'cancelled' });
  });
});

describe('a stock-reserved delivered in one statement', () => {
  it('ends as consume ends it: a first, after a cancellation, a second reservation of the order, a copy', async () => {
    const consumer = 'payments.stock-reserved.v1';
    const handler = handleStockReserved({ now });
    const rowsOf = async (orderId: string) => ({
      attempts: (await db.paymentAttempt.findMany({ where: { orderId } })).map((a) => ({
        status: a.status,
        amountCents: a.amountCents,
        providerCalls: a.providerCalls,
      })),
      cancelled: (
        await db.$queryRaw<{ cancelled: boolean }[]>`
        SELECT cancelled_at IS NOT NULL AS cancelled FROM payment_orders WHERE order_id = ${orderId}::uuid`
      )[0]?.cancelled,
    });
    for (const before of ['nothing', 'cancelled', 'reserved by another message', 'the same message'] as const) {
      const outcomes: Record<string, string> = {};
      const rows: Record<string, unknown> = {};
      for (const way of ['oneStatement', 'plain'] as const) {
        const message = stockReserved();
        const { orderId } = message.body;
        if (before === 'cancelled') await cancel(orderId);
        if (before === 'reserved by another message') await reserve(stockReserved(orderId));
        if (before === 'the same message') await reserve(message);
        const outcome =
          way === 'oneStatement'
            ? await inbox().consumeInOneStatement(consumer, message, handler)
            : await inbox().consume(consumer, message, handler);
        outcomes[way] = outcome.outcome;
        rows[way] = {
          ...(await rowsOf(orderId)),
          recorded: await db.processedMessage.count({ where: { consumer, messageId: message.messageId } }),
        };
      }
      expect(outcomes.oneStatement, before).toBe(outcomes.plain);
      expect(rows.oneStatement, before).toEqual(rows.plain);
    }
  });
});

describe("a cancellation racing the charge's answer (the worker and a message, one attempt row)", () => {
  /** An attempt as the worker holds it after its claim: one provider call made, its answer not yet recorded. */
  async function claimedAttempt() {
    const message = stockReserved();
    await reserve(message);
    const { orderId } = message.body;
    await db.paymentAttempt.update({ where: { orderId }, data: { providerCalls: 1, leaseOwner: 'a-worker' } });
    return attemptOf(orderId);
  }
  const recorder = (recorderDb: PrismaClient) => ({
    db: recorderDb,
    log: createLogger('payments', 'silent'),
    now,
    retryDelayMs: 1,
  });
  const capturedAnswer = { kind: 'succeeded', id: 'pi_answered' } as const;
  /** Refunded: the capture recorded and announced, and a refund asked for with its own key. */
  async function expectRefundAsked(orderId: string) {
    expect(await attemptOf(orderId)).toMatchObject({
      status: 'refund_pending',
      paymentIntentId: 'pi_answered',
      refundIdempotencyKey: expect.any(String),
      leaseOwner: null,
    });
    const captured = (await eventsOf()).filter(
      (event) => event.type === 'payments.payment-captured.v1' && event.aggregateId === orderId,
    );
    expect(captured).toHaveLength(1);
  }

  it('asks for the refund when the cancel, held after its write, commits first and the capture waits on the row', async () => {
    const attempt = await claimedAttempt();
    const cancelling = held(handleOrderCancelled({ now }), { statements: 99 }); // held before its commit
    const cancelled = inbox().consume(
      'payments.order-cancelled.v1',
      orderCancelled(attempt.orderId),
      cancelling.handler,
    );
    await cancelling.reached;
    const recorded = recordCharge(recorder(db), attempt, capturedAnswer);
    await finishedOrWaiting(db, recorded); // the one-statement capture waits for the cancel's row lock
    cancelling.release();
    await Promise.all([cancelled, recorded]);
    await expectRefundAsked(attempt.orderId);
  });

  it('asks for the refund when the capture, one statement, commits while the cancel is held before it reads the attempt', async () => {
    const attempt = await claimedAttempt();
    // The cancel held after its tombstone, before its locking read of the attempt: the capture
    // (its write and its event, no transaction) commits meanwhile; the cancel then reads it
    // captured and asks for the refund.
    const cancelling = held(handleOrderCancelled({ now }), { statements: 1 });
    const cancelled = inbox().consume(
      'payments.order-cancelled.v1',
      orderCancelled(attempt.orderId),
      cancelling.handler,
    );
    await cancelling.reached;
    await recordCharge(recorder(db), attempt, capturedAnswer);
    expect(await attemptOf(attempt.orderId)).toMatchObject({ status: 'captured' });
    cancelling.release();
    expect(await cancelled).toEqual({ outcome: 'processed' });
    await expectRefundAsked(attempt.orderId);
  });
});

describe("the charge's answer in one statement", () => {
  it('records every answer as the plain transaction records it: a capture, a capture after a cancel, a decline, a second answer', async () => {
    const at = new Date();
    const recorder = { db, log: createLogger('payments', 'silent'), now: () => at, retryDelayMs: 1 };
    const answers = {
      captured: { kind: 'succeeded', id: 'pi_answered' },
      declined: { kind: 'declined', code: 'card_declined', reason: 'Your card was declined.' },
    } as const;
    const cases = [
      { name: 'a capture', answer: answers.captured },
      { name: 'a capture after a cancel', answer: answers.captured, cancelledFirst: true },
      { name: 'a decline', answer: answers.declined },
      { name: 'a second answer', answer: answers.captured, answeredFirst: true },
    ];
    for (const { name, answer, cancelledFirst, answeredFirst } of cases) {
      const seen: Record<string, unknown> = {};
      for (const way of ['recordCharge', 'plain'] as const) {
        const message = stockReserved();
        const { orderId } = message.body;
        await reserve(message);
        await db.paymentAttempt.update({ where: { orderId }, data: { providerCalls: 1, leaseOwner: 'a-worker' } });
        if (cancelledFirst) await cancel(orderId);
        if (answeredFirst) await recordFinalAnswer(db, await attemptOf(orderId), answer, at);
        const attempt = await attemptOf(orderId);
        await (way === 'recordCharge'
          ? recordCharge(recorder, attempt, answer)
          : recordFinalAnswer(db, attempt, answer, at));
        const row = await attemptOf(orderId);
        seen[way] = {
          row: {
            ...row,
            id: 'the attempt',
            orderId: 'the order',
            idempotencyKey: 'its key',
            causationId: 'its cause',
            correlationId: 'its correlation',
            refundIdempotencyKey: row.refundIdempotencyKey && 'a refund key',
            cancelCausationId: row.cancelCausationId && 'the cancel',
            createdAt: 0,
            idempotencyKeyCreatedAt: 0,
            cancelRequestedAt: row.cancelRequestedAt && 'asked',
            traceparent: 0,
            nextAttemptAt: row.nextAttemptAt.getTime() === at.getTime() ? 'the answer' : 'as opened',
          },
          events: (await eventsOf())
            .filter((event) => event.aggregateId === orderId)
            .map((event) => ({
              type: event.type,
              version: event.aggregateVersion,
              body: { ...event.body, orderId: 'the order' },
            })),
        };
      }
      expect(seen.recordCharge, name).toEqual(seen.plain);
    }
  });
});

describe('a cancellation racing the opening of the payment (two messages, two queues)', () => {
  /** What payments holds for the order once both messages are in and the worker has done all it can. */
  async function moneyKept(orderId: string) {
    for (let round = 0; round < 5 && (await worker().runOnce()) > 0; round++);
    const attempt = await db.paymentAttempt.findUnique({ where: { orderId } });
    const charged = intentsFor(orderId).filter((intent) => intent.status === 'succeeded').length;
    const refunded = simulator.refunds().filter((refund) => refund.metadata.order_id === orderId).length;
    return { status: attempt?.status ?? 'none', kept: charged - refunded };
  }

  it('charges nothing when the opening is held between its read and its write while the cancel runs', async () => {
    const message = stockReserved();
    const { orderId } = message.body;
    const opening = held(handleStockReserved({ now }));
    const opened = inbox().consume('payments.stock-reserved.v1', message, opening.handler);
    await opening.reached;
    const cancelled = cancel(orderId);
    // The cancel either ran to its end (and the opening must then see its tombstone) or waits
    // for the opening's lock (and must then see the attempt it opened).
    await finishedOrWaiting(db, cancelled);
    opening.release();
    await Promise.all([opened, cancelled]);
    expect(await moneyKept(orderId)).toMatchObject({ kept: 0 });
    expect(['none', 'cancelled']).toContain((await moneyKept(orderId)).status);
  });

  it('charges nothing when the cancel is held between its read and its write while the opening runs', async () => {
    const message = stockReserved();
    const { orderId } = message.body;
    const cancelling = held(handleOrderCancelled({ now }));
    const cancelled = inbox().consume('payments.order-cancelled.v1', orderCancelled(orderId), cancelling.handler);
    await cancelling.reached;
    const opened = reserve(message);
    await finishedOrWaiting(db, opened);
    cancelling.release();
    await Promise.all([opened, cancelled]);
    expect(await moneyKept(orderId)).toMatchObject({ kept: 0 });
    expect(['none', 'cancelled']).toContain((await moneyKept(orderId)).status);
  });

  it('keeps no money for any of 60 orders whose two messages arrive at the same moment', async () => {
    const orders = Array.from({ length: 60 }, () => stockReserved());
    await Promise.all(orders.flatMap((message) => [reserve(message), cancel(message.body.orderId)]));
    for (const message of orders) expect(await moneyKept(message.body.orderId)).toMatchObject({ kept: 0 });
  });
});

describe('payments HTTP: a parked attempt', () => {
  const ADMIN_TOKEN = 'test-admin-token-0123456789';
  const prefix = uniqueName('idem_test_payments');
  let service: Awaited<ReturnType<typeof startPayments>>;
  const url = (path: string) => `http://127.0.0.1:${service.http.port}${path}`;

  beforeAll(async () => {
    service = await startPayments(
      loadConfig({
        DATABASE_URL: database.url,
        IDEM_QUEUE_PREFIX: prefix,
        STRIPE_API_BASE: apiBase,
        PORT: '0',
        ADMIN_TOKEN,
        IDEM_ROLES: 'http',
        LOG_LEVEL: 'silent',
      }),
      { faults: noFaults },
    );
  });
  afterAll(async () => {
    await service.stop();
    await deleteQueues(prefix);
  });

  it('shows the provider message and the status, counts it for the alert, and lets only an operator retry it', async () => {
    const message = stockReserved();
    await reserve(message);
    await worker('sk_test_not_the_simulators_key').runOnce();
    const lookup = (headers: Record<string, string> = {}) =>
      fetch(url(`/payments?orderId=${message.body.orderId}`), { headers });
    expect((await lookup()).status).toBe(401); // payments are an operator read
    const { payments } = (await (await lookup({ authorization: `Bearer ${ADMIN_TOKEN}` })).json()) as {
      payments: { paymentAttemptId: string; status: string; failureReason: string }[];
    };
    expect(payments).toEqual([
      expect.objectContaining({ status: 'parked', failureReason: expect.stringContaining('Invalid API Key') }),
    ]);
    expect(await (await fetch(url('/metrics'))).text()).toMatch(
      /^idem_payment_attempts\{status="parked",service="payments"\} 1$/m,
    );

    const retry = (token?: string) =>
      fetch(url(`/payments/${payments[0]!.paymentAttemptId}/retry`), {
        method: 'POST',
        headers: token ? { authorization: `Bearer ${token}` } : {},
      });
    expect((await retry()).status).toBe(401);
    expect((await retry(ADMIN_TOKEN)).status).toBe(202);
    expect(await attemptOf(message.body.orderId)).toMatchObject({ status: 'pending', failureReason: null });
    expect((await retry(ADMIN_TOKEN)).status).toBe(404); // only a parked attempt
    // The same request is refused again (the integration is still broken).
    await waitFor(async () => (await worker('sk_test_not_the_simulators_key').runOnce()) === 1);
    expect(await attemptOf(message.body.orderId)).toMatchObject({ status: 'parked', providerCalls: 2 });
  });
});
