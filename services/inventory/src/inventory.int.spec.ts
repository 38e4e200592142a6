import { randomUUID } from 'node:crypto';
import type { Envelope } from '@idem/shop';
import { createInbox, type LocksFirst, type MessageHandler } from '@idem/inbox';
import { createFaults, parseFaultRules } from '@idem/faults';
import { createPublisher, type Publisher } from '@idem/messaging';
import {
  deleteQueues,
  finishedOrWaiting,
  held,
  orderPlacedMessage,
  redisUrl,
  serviceDatabase,
  uniqueName,
  waitFor,
} from '@idem/testkit';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from './config.js';
import { PACKAGE_TABLES } from './tables.js';
import { handleOrderCancelled } from './consumers/order-cancelled.js';
import { handleOrderPlaced } from './consumers/order-placed.js';
import { handlePaymentCaptured } from './consumers/payment-captured.js';
import { handlePaymentFailed } from './consumers/payment-failed.js';
import { connectDatabase, type Tx } from './db.js';
import { expireReservations } from './application/reservations.js';
import { startInventory } from './service.js';
import { shop } from '@idem/shop';

const ADMIN_TOKEN = 'test-admin-token-0123456789';
const database = serviceDatabase('inventory', {
  root: new URL('../', import.meta.url),
  tables: PACKAGE_TABLES,
  connect: connectDatabase,
  hooks: { beforeAll, afterAll },
});
const { db } = database;
const now = () => new Date();

beforeEach(async () => {
  await database.empty();
  await db.stockItem.createMany({
    data: [
      { sku: 'mouse', available: 10, updatedAt: now() },
      { sku: 'cable', available: 10, updatedAt: now() },
    ],
  });
});

function placed(
  lines: { sku: string; quantity: number }[],
  orderId = randomUUID(),
): Envelope<'orders.order-placed.v1'> {
  const message = orderPlacedMessage({ aggregateId: orderId });
  return {
    ...message,
    body: { ...message.body, orderId, lines: lines.map((l) => ({ ...l, unitPriceCents: 100 })), totalCents: 100 },
  };
}

function cancelled(orderId: string, aggregateVersion: number): Envelope<'orders.order-cancelled.v1'> {
  return {
    ...orderPlacedMessage(),
    type: 'orders.order-cancelled.v1',
    aggregateId: orderId,
    aggregateVersion,
    body: { orderId, reason: 'customer asked' },
  };
}

const stock = async (sku: string) => {
  const item = await db.stockItem.findUniqueOrThrow({ where: { sku } });
  return { available: item.available, reserved: item.reserved };
};
const outboxTypes = async () => (await db.outboxMessage.findMany({ orderBy: { position: 'asc' } })).map((m) => m.type);

describe('inventory consumers', () => {
  const inbox = () => createInbox({ db });

  it('reserves every line of an order, publishes stock-reserved, and changes nothing on redelivery', async () => {
    const message = placed([
      { sku: 'mouse', quantity: 2 },
      { sku: 'cable', quantity: 1 },
      { sku: 'mouse', quantity: 1 },
    ]);
    expect(await inbox().consume('inventory.order-placed.v1', message, handleOrderPlaced({ now }))).toEqual({
      outcome: 'processed',
    });
    expect(await inbox().consume('inventory.order-placed.v1', message, handleOrderPlaced({ now }))).toEqual({
      outcome: 'duplicate',
    });
    expect(await stock('mouse')).toEqual({ available: 7, reserved: 3 });
    expect(await stock('cable')).toEqual({ available: 9, reserved: 1 });
    const [event] = await db.outboxMessage.findMany();
    expect(event!.envelope).toMatchObject({
      type: 'inventory.stock-reserved.v1',
      causationId: message.messageId,
      correlationId: message.correlationId,
      body: {
        orderId: message.body.orderId,
        lines: [
          { sku: 'cable', quantity: 1 },
          { sku: 'mouse', quantity: 3 },
        ],
        payment: { amountCents: 100, currency: 'eur', method: 'pm_card_visa' },
      },
    });
  });

  it('reserves nothing when one line is short and publishes stock-rejected with the shortages', async () => {
    const message = placed([
      { sku: 'mouse', quantity: 1 },
      { sku: 'cable', quantity: 11 },
      { sku: 'ghost', quantity: 1 },
    ]);
    await inbox().consume('inventory.order-placed.v1', message, handleOrderPlaced({ now }));
    expect(await stock('mouse')).toEqual({ available: 10, reserved: 0 });
    const [event] = await db.outboxMessage.findMany();
    expect(event!.envelope).toMatchObject({
      type: 'inventory.stock-rejected.v1',
      body: {
        shortages: [
          { sku: 'cable', requested: 11, available: 10 },
          { sku: 'ghost', requested: 1, available: 0 },
        ],
      },
    });
  });

  it('releases a reservation once when the order is cancelled, and a duplicate cancel changes nothing', async () => {
    const order = placed([{ sku: 'mouse', quantity: 4 }]);
    await inbox().consume('inventory.order-placed.v1', order, handleOrderPlaced({ now }));
    const cancel = cancelled(order.body.orderId, 3);
    expect(await inbox().consume('inventory.order-cancelled.v1', cancel, handleOrderCancelled({ now }))).toEqual({
      outcome: 'processed',
    });
    expect(await inbox().consume('inventory.order-cancelled.v1', cancel, handleOrderCancelled({ now }))).toEqual({
      outcome: 'duplicate',
    });
    expect(await stock('mouse')).toEqual({ available: 10, reserved: 0 });
    expect(await db.reservation.findUniqueOrThrow({ where: { orderId: order.body.orderId } })).toMatchObject({
      status: 'released',
    });
  });

  it('leaves a tombstone when the cancel arrives first, so the late order-placed is stale and reserves nothing', async () => {
    const order = placed([{ sku: 'mouse', quantity: 4 }]);
    await inbox().consume(
      'inventory.order-cancelled.v1',
      cancelled(order.body.orderId, 2),
      handleOrderCancelled({ now }),
    );
    expect(await inbox().consume('inventory.order-placed.v1', order, handleOrderPlaced({ now }))).toMatchObject({
      outcome: 'stale',
    });
    expect(await stock('mouse')).toEqual({ available: 10, reserved: 0 });
    expect(await outboxTypes()).toEqual([]);
  });

  it('releases the stock of an order whose payment failed, once', async () => {
    const order = placed([{ sku: 'cable', quantity: 2 }]);
    await inbox().consume('inventory.order-placed.v1', order, handleOrderPlaced({ now }));
    const failed: Envelope<'payments.payment-failed.v1'> = {
      ...orderPlacedMessage(),
      type: 'payments.payment-failed.v1',
      producer: 'payments',
      body: { orderId: order.body.orderId, code: 'card_declined', reason: 'Your card was declined.' },
    };
    await inbox().consume('inventory.payment-failed.v1', failed, handlePaymentFailed({ now }));
    await inbox().consume(
      'inventory.payment-failed.v1',
      { ...failed, messageId: randomUUID() },
      handlePaymentFailed({ now }),
    );
    expect(await stock('cable')).toEqual({ available: 10, reserved: 0 });
  });

  it('commits the stock of a paid order: it leaves reserved and stays sold; a cancel after it gives it back', async () => {
    const order = placed([{ sku: 'mouse', quantity: 3 }]);
    await inbox().consume('inventory.order-placed.v1', order, handleOrderPlaced({ now }));
    expect(await stock('mouse')).toEqual({ available: 7, reserved: 3 });
    const captured: Envelope<'payments.payment-captured.v1'> = {
      ...orderPlacedMessage(),
      type: 'payments.payment-captured.v1',
      producer: 'payments',
      body: { orderId: order.body.orderId, paymentIntentId: 'pi_1', amountCents: 300, currency: 'eur' },
    };
    const capture = (message: Envelope<'payments.payment-captured.v1'>) =>
      inbox().consume('inventory.payment-captured.v1', message, handlePaymentCaptured({ now }));
    expect(await capture(captured)).toMatchObject({ outcome: 'processed' });
    expect(await capture({ ...captured, messageId: randomUUID() })).toMatchObject({ outcome: 'stale' });
    expect(await stock('mouse')).toEqual({ available: 7, reserved: 0 });

    await inbox().consume(
      'inventory.order-cancelled.v1',
      cancelled(order.body.orderId, 3),
      handleOrderCancelled({ now }),
    );
    expect(await stock('mouse')).toEqual({ available: 10, reserved: 0 });
  });

  it('commits an order of several lines, a SKU twice among them, once; captures and new orders on the same SKUs side by side never deadlock', async () => {
    const capture = (orderId: string) =>
      inbox().consume(
        'inventory.payment-captured.v1',
        {
          ...orderPlacedMessage(),
          type: 'payments.payment-captured.v1',
          producer: 'payments',
          body: { orderId, paymentIntentId: `pi_${orderId}`, amountCents: 100, currency: 'eur' },
        },
        handlePaymentCaptured({ now }),
      );
    const lines = [
      { sku: 'mouse', quantity: 1 },
      { sku: 'cable', quantity: 2 },
      { sku: 'mouse', quantity: 1 },
    ];
    const first = placed(lines);
    await inbox().consume('inventory.order-placed.v1', first, handleOrderPlaced({ now }));
    expect(await capture(first.body.orderId)).toEqual({ outcome: 'processed' });
    expect(await stock('mouse')).toEqual({ available: 8, reserved: 0 });
    expect(await stock('cable')).toEqual({ available: 8, reserved: 0 });
    expect(await db.reservation.findUniqueOrThrow({ where: { orderId: first.body.orderId } })).toMatchObject({
      status: 'committed',
    });

    // Three orders reserved, then their captures beside three new orders naming the SKUs the
    // other way round: each takes its locks in SKU order, so every one of them goes through.
    const reserved = [placed(lines), placed(lines), placed(lines)];
    for (const order of reserved) await inbox().consume('inventory.order-placed.v1', order, handleOrderPlaced({ now }));
    const reversed = () =>
      placed(
        [
          { sku: 'mouse', quantity: 1 },
          { sku: 'cable', quantity: 1 },
        ].reverse(),
      );
    const outcomes = await Promise.all([
      ...reserved.map((order) => capture(order.body.orderId)),
      ...[reversed(), reversed()].map((order) =>
        inbox().consume('inventory.order-placed.v1', order, handleOrderPlaced({ now })),
      ),
    ]);
    expect(outcomes).toEqual(Array.from({ length: 5 }, () => ({ outcome: 'processed' })));
    expect(await stock('mouse')).toEqual({ available: 8 - 6 - 2, reserved: 2 });
    expect(await stock('cable')).toEqual({ available: 8 - 6 - 2, reserved: 2 });
  });

  it('serialises a capture and a cancel on the reservation row, whichever holds it first: the stock ends given back once', async () => {
    const captured = (orderId: string): Envelope<'payments.payment-captured.v1'> => ({
      ...orderPlacedMessage(),
      type: 'payments.payment-captured.v1',
      producer: 'payments',
      body: { orderId, paymentIntentId: `pi_${orderId}`, amountCents: 200, currency: 'eur' },
    });
    const cancelling = (orderId: string, handler: MessageHandler<Tx, Envelope<'orders.order-cancelled.v1'>>) =>
      inbox().consume('inventory.order-cancelled.v1', cancelled(orderId, 3), handler);
    // The capture held before its commit (its one statement has committed the reservation and
    // holds its row): the cancel waits, then finds it committed and gives the sold stock back.
    const first = placed([{ sku: 'mouse', quantity: 2 }]);
    await inbox().consume('inventory.order-placed.v1', first, handleOrderPlaced({ now }));
    const capturing = held(handlePaymentCaptured({ now }));
    const capture = inbox().consume('inventory.payment-captured.v1', captured(first.body.orderId), capturing.handler);
    await capturing.reached;
    const cancel = cancelling(first.body.orderId, handleOrderCancelled({ now }));
    await finishedOrWaiting(db, cancel);
    capturing.release();
    expect(await capture).toEqual({ outcome: 'processed' });
    expect(await cancel).toEqual({ outcome: 'processed' });
    expect(await stock('mouse')).toEqual({ available: 10, reserved: 0 });
    // The cancel held between its read (the reservation, locked) and its write: the capture in one
    // statement waits on the row, then finds nothing reserved and commits nothing (stale).
    const second = placed([{ sku: 'cable', quantity: 2 }]);
    await inbox().consume('inventory.order-placed.v1', second, handleOrderPlaced({ now }));
    const holding = held(handleOrderCancelled({ now }), { statements: 2 });
    const cancelHeld = cancelling(second.body.orderId, holding.handler);
    await holding.reached;
    const late = inbox().consumeInOneStatement(
      'inventory.payment-captured.v1',
      captured(second.body.orderId),
      handlePaymentCaptured({ now }),
    );
    await finishedOrWaiting(db, late);
    holding.release();
    expect(await cancelHeld).toEqual({ outcome: 'processed' });
    expect(await late).toMatchObject({ outcome: 'stale' });
    expect(await stock('cable')).toEqual({ available: 10, reserved: 0 });
  });

  it('ends a capture delivered in one statement as consume ends it, whatever became of the reservation', async () => {
    const capture = (orderId: string): Envelope<'payments.payment-captured.v1'> => ({
      ...orderPlacedMessage(),
      type: 'payments.payment-captured.v1',
      producer: 'payments',
      body: { orderId, paymentIntentId: `pi_${orderId}`, amountCents: 200, currency: 'eur' },
    });
    const consumer = 'inventory.payment-captured.v1';
    const handler = handlePaymentCaptured({ now });
    // Each way with a SKU of its own (both start with 10): `mouse` in one statement, `cable` through consume.
    const ways = { oneStatement: 'mouse', plain: 'cable' } as const;
    for (const before of ['reserved', 'committed', 'released', 'never placed'] as const) {
      const outcomes: Record<string, string> = {};
      const rows: Record<string, unknown> = {};
      for (const [way, sku] of Object.entries(ways)) {
        const order = placed([{ sku, quantity: 2 }]);
        const { orderId } = order.body;
        if (before !== 'never placed')
          await inbox().consume('inventory.order-placed.v1', order, handleOrderPlaced({ now }));
        if (before === 'committed') await inbox().consume(consumer, capture(orderId), handler);
        if (before === 'released')
          await inbox().consume('inventory.order-cancelled.v1', cancelled(orderId, 3), handleOrderCancelled({ now }));
        const message = capture(orderId);
        const outcome =
          way === 'oneStatement'
            ? await inbox().consumeInOneStatement(consumer, message, handler)
            : await inbox().consume(consumer, message, handler);
        outcomes[way] = outcome.outcome;
        rows[way] = {
          stock: await stock(sku),
          reservation: (await db.reservation.findUnique({ where: { orderId } }))?.status ?? 'none',
          recorded: await db.processedMessage.count({ where: { consumer, messageId: message.messageId } }),
        };
      }
      expect(outcomes.oneStatement, before).toBe(outcomes.plain);
      expect(rows.oneStatement, before).toEqual(rows.plain);
    }
  });

  it('ends an order-placed delivered in one statement as consume ends it: covered, short, unknown, cancelled first, a copy', async () => {
    const consumer = 'inventory.order-placed.v1';
    const handler = handleOrderPlaced({ now });
    type Case = {
      lines: (sku: (name: string) => string) => { sku: string; quantity: number }[];
      cancelledFirst?: true;
      copy?: true;
    };
    const cases: Record<string, Case> = {
      'covered, a SKU twice': {
        lines: (sku) => [
          { sku: sku('a'), quantity: 2 },
          { sku: sku('b'), quantity: 1 },
          { sku: sku('a'), quantity: 1 },
        ],
      },
      'the last units': { lines: (sku) => [{ sku: sku('a'), quantity: 10 }] },
      'one line short': {
        lines: (sku) => [
          { sku: sku('a'), quantity: 1 },
          { sku: sku('b'), quantity: 11 },
        ],
      },
      'an unknown SKU': {
        lines: (sku) => [
          { sku: sku('a'), quantity: 1 },
          { sku: sku('ghost'), quantity: 1 },
        ],
      },
      'cancelled first': { lines: (sku) => [{ sku: sku('a'), quantity: 1 }], cancelledFirst: true },
      'a copy': { lines: (sku) => [{ sku: sku('a'), quantity: 1 }], copy: true },
    };
    for (const [name, { lines, cancelledFirst, copy }] of Object.entries(cases)) {
      const seen: Record<string, string> = {};
      for (const way of ['one', 'plain'] as const) {
        const sku = (name: string) => `${way}-${name}`;
        await db.stockItem.deleteMany({ where: { sku: { startsWith: `${way}-` } } });
        await db.stockItem.createMany({
          data: ['a', 'b'].map((n) => ({ sku: sku(n), available: 10, updatedAt: now() })),
        });
        await db.outboxMessage.deleteMany();
        const order = placed(lines(sku));
        const { orderId } = order.body;
        if (cancelledFirst)
          await inbox().consume('inventory.order-cancelled.v1', cancelled(orderId, 2), handleOrderCancelled({ now }));
        const deliver = () =>
          way === 'one'
            ? inbox().consumeInOneStatement(consumer, order, handler)
            : inbox().consume(consumer, order, handler);
        const outcomes = copy ? [await deliver(), await deliver()] : [await deliver()];
        const reservation = await db.reservation.findUnique({ where: { orderId } });
        const events = await db.outboxMessage.findMany({ orderBy: { position: 'asc' } });
        seen[way] = JSON.stringify({
          outcomes: outcomes.map((o) => o.outcome),
          stock: await db.stockItem.findMany({
            where: { sku: { startsWith: `${way}-` } },
            orderBy: { sku: 'asc' },
            select: { sku: true, available: true, reserved: true },
          }),
          reservation: reservation && { status: reservation.status, lines: reservation.lines },
          events: events.map((e) => ({ type: e.type, body: (e.envelope as { body: unknown }).body })),
          versions: await db.$queryRaw`SELECT version FROM aggregate_versions WHERE aggregate_id = ${orderId}`,
          recorded: await db.processedMessage.count({ where: { consumer, messageId: order.messageId } }),
        })
          .replaceAll(`${way}-`, '')
          .replaceAll(orderId, 'the order');
      }
      expect(seen.one, name).toEqual(seen.plain);
    }
  });

  it('serialises a reservation in one statement with a plain one for the same last units, and with a cancel of its order', async () => {
    const consumer = 'inventory.order-placed.v1';
    // A plain reservation held between its locking read of the stock and its write: the one
    // statement waits on the stock rows, then reads what the first left (2) and reserves nothing.
    const holding = held(handleOrderPlaced({ now }), { statements: 2 });
    const first = inbox().consume(consumer, placed([{ sku: 'mouse', quantity: 8 }]), holding.handler);
    await holding.reached;
    const second = placed([{ sku: 'mouse', quantity: 5 }]);
    const racing = inbox().consumeInOneStatement(consumer, second, handleOrderPlaced({ now }));
    await finishedOrWaiting(db, racing);
    holding.release();
    expect(await first).toEqual({ outcome: 'processed' });
    expect(await racing).toEqual({ outcome: 'processed' });
    expect(await stock('mouse')).toEqual({ available: 2, reserved: 8 });
    expect(await db.reservation.findUniqueOrThrow({ where: { orderId: second.body.orderId } })).toMatchObject({
      status: 'rejected',
    });
    expect(await outboxTypes()).toEqual(['inventory.stock-reserved.v1', 'inventory.stock-rejected.v1']);

    // A cancel held after it left its version (after its stock and its reservation, none here):
    // the one statement waits on the version's row, then finds the order cancelled and reserves
    // nothing (stale).
    await db.outboxMessage.deleteMany();
    const order = placed([{ sku: 'cable', quantity: 1 }]);
    const cancelling = held(handleOrderCancelled({ now }), { statements: 3 });
    const cancel = inbox().consume(
      'inventory.order-cancelled.v1',
      cancelled(order.body.orderId, 2),
      cancelling.handler,
    );
    await cancelling.reached;
    const late = inbox().consumeInOneStatement(consumer, order, handleOrderPlaced({ now }));
    await finishedOrWaiting(db, late);
    cancelling.release();
    expect(await cancel).toEqual({ outcome: 'processed' });
    expect(await late).toMatchObject({ outcome: 'stale' });
    expect(await stock('cable')).toEqual({ available: 10, reserved: 0 });
    expect(await outboxTypes()).toEqual([]);
  });
});

describe("one lock order: stock, then a reservation, then the order's version", () => {
  const inbox = () => createInbox({ db });
  /** A message with a chosen id: a batch runs its messages in message-id order. */
  const withId = <M extends { messageId: string }>(message: M, n: number): M => ({
    ...message,
    messageId: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
  });
  /** `handler` with what it locks first, held before the second message of its batch, failures kept. */
  function heldBeforeSecond<H extends MessageHandler<Tx, never>>(handler: H, failures: unknown[]) {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let reach!: () => void;
    const reached = new Promise<void>((resolve) => (reach = resolve));
    let seen = 0;
    const gated = async (message: Parameters<H>[0], tx: Tx) => {
      if (seen++ === 1) {
        reach();
        await released;
      }
      return handler(message, tx).catch((error: unknown) => {
        failures.push(error);
        throw error;
      });
    };
    return {
      handler: Object.assign(gated, {
        lockFirst: (handler as Partial<LocksFirst<Tx, never>>).lockFirst,
      }) as unknown as H,
      reached,
      release,
    };
  }
  const deadlocked = (failures: unknown[]) =>
    failures.filter(
      (error) => String(error).includes('40P01') || String((error as { code?: string }).code).includes('40P01'),
    );

  it('lets two batches reserving the same SKUs in opposite message orders wait for each other, never deadlock', async () => {
    const failures: unknown[] = [];
    const consumer = 'inventory.order-placed.v1';
    const first = heldBeforeSecond(handleOrderPlaced({ now }), failures);
    const second = heldBeforeSecond(handleOrderPlaced({ now }), failures);
    const one = inbox().consumeBatch(
      consumer,
      [withId(placed([{ sku: 'mouse', quantity: 1 }]), 1), withId(placed([{ sku: 'cable', quantity: 1 }]), 2)],
      first.handler,
    );
    await first.reached; // holds what it locked for its first order
    const other = inbox().consumeBatch(
      consumer,
      [withId(placed([{ sku: 'cable', quantity: 1 }]), 3), withId(placed([{ sku: 'mouse', quantity: 1 }]), 4)],
      second.handler,
    );
    await Promise.race([second.reached, finishedOrWaiting(db, other)]);
    first.release();
    second.release();
    expect([...(await one), ...(await other)].map((o) => o.outcome)).toEqual([
      'processed',
      'processed',
      'processed',
      'processed',
    ]);
    expect(deadlocked(failures)).toEqual([]);
    expect(await stock('mouse')).toEqual({ available: 8, reserved: 2 });
    expect(await stock('cable')).toEqual({ available: 8, reserved: 2 });
  });

  it('lets a batch of cancels and a reservation in one statement of the same SKUs wait for each other, never deadlock', async () => {
    const failures: unknown[] = [];
    const [x, y] = [placed([{ sku: 'mouse', quantity: 1 }]), placed([{ sku: 'cable', quantity: 1 }])];
    for (const order of [x, y]) await inbox().consume('inventory.order-placed.v1', order, handleOrderPlaced({ now }));
    const cancels = heldBeforeSecond(handleOrderCancelled({ now }), failures);
    const batch = inbox().consumeBatch(
      'inventory.order-cancelled.v1',
      [withId(cancelled(x.body.orderId, 3), 11), withId(cancelled(y.body.orderId, 3), 12)],
      cancels.handler,
    );
    await cancels.reached; // x's cancel done: its stock (mouse) held
    const z = placed([
      { sku: 'cable', quantity: 1 },
      { sku: 'mouse', quantity: 1 },
    ]);
    const reserving = inbox().consumeInOneStatement('inventory.order-placed.v1', z, handleOrderPlaced({ now }));
    await finishedOrWaiting(db, reserving);
    cancels.release();
    expect((await batch).map((o) => o.outcome)).toEqual(['processed', 'processed']);
    expect(await reserving).toEqual({ outcome: 'processed' });
    expect(deadlocked(failures)).toEqual([]);
    expect(await stock('mouse')).toEqual({ available: 9, reserved: 1 });
    expect(await stock('cable')).toEqual({ available: 9, reserved: 1 });
  });
});

describe('reservation expiry', () => {
  const inbox = () => createInbox({ db });
  const TTL = 15 * 60_000;
  const later = () => new Date(Date.now() + TTL + 1_000);
  const reserve = async (sku: string, quantity: number) => {
    const order = placed([{ sku, quantity }]);
    await inbox().consume('inventory.order-placed.v1', order, handleOrderPlaced({ now }));
    return order;
  };
  const captureOf = (orderId: string): Envelope<'payments.payment-captured.v1'> => ({
    ...orderPlacedMessage(),
    type: 'payments.payment-captured.v1',
    producer: 'payments',
    body: { orderId, paymentIntentId: 'pi_1', amountCents: 100, currency: 'eur' },
  });

  it('gives back the stock of a reservation whose payment never completed, once, and says so to the order', async () => {
    const order = await reserve('mouse', 4);
    expect(await expireReservations(db, { ttlMs: TTL, now: now() })).toBe(0); // young: kept
    expect(await expireReservations(db, { ttlMs: TTL, now: later() })).toBe(1);
    expect(await expireReservations(db, { ttlMs: TTL, now: later() })).toBe(0);
    expect(await stock('mouse')).toEqual({ available: 10, reserved: 0 });
    expect(await db.reservation.findUniqueOrThrow({ where: { orderId: order.body.orderId } })).toMatchObject({
      status: 'expired',
    });
    const [event] = (await db.outboxMessage.findMany({ where: { type: 'inventory.reservation-expired.v1' } })).map(
      (row) => row.envelope as Envelope<'inventory.reservation-expired.v1'>,
    );
    expect(event).toMatchObject({
      aggregateId: order.body.orderId,
      correlationId: order.correlationId,
      body: { orderId: order.body.orderId, lines: [{ sku: 'mouse', quantity: 4 }] },
    });
    // A capture that comes after commits nothing (orders cancels the order and payments refunds),
    // and neither does a cancel.
    expect(
      await inbox().consume(
        'inventory.payment-captured.v1',
        captureOf(order.body.orderId),
        handlePaymentCaptured({ now }),
      ),
    ).toMatchObject({ outcome: 'stale' });
    await inbox().consume(
      'inventory.order-cancelled.v1',
      cancelled(order.body.orderId, 3),
      handleOrderCancelled({ now }),
    );
    expect(await stock('mouse')).toEqual({ available: 10, reserved: 0 });
  });

  it('leaves a reservation that a capture holds before its commit to it: the paid stock stays sold', async () => {
    const order = await reserve('cable', 2);
    const capturing = held(handlePaymentCaptured({ now }));
    const captured = inbox().consume('inventory.payment-captured.v1', captureOf(order.body.orderId), capturing.handler);
    await capturing.reached; // the reservation is committed and locked, the transaction not yet
    // The sweep takes the stock first, as the capture did: it waits for the capture's commit,
    // then finds the reservation committed and expires nothing.
    const sweep = expireReservations(db, { ttlMs: TTL, now: later() });
    await finishedOrWaiting(db, sweep);
    capturing.release();
    expect(await captured).toEqual({ outcome: 'processed' });
    expect(await sweep).toBe(0);
    expect(await expireReservations(db, { ttlMs: TTL, now: later() })).toBe(0);
    expect(await stock('cable')).toEqual({ available: 8, reserved: 0 });
  });
});

/** The idem_deliveries_total line of a /metrics text with these labels, if there is one. */
const deliveriesLine = (metrics: string, labels: Record<string, string>) =>
  metrics
    .split('\n')
    .find(
      (line) =>
        line.startsWith('idem_deliveries_total{') &&
        Object.entries(labels).every(([label, value]) => line.includes(`${label}="${value}"`)),
    );

describe('inventory service', () => {
  let publisher: Publisher;
  /**
   * A relay publishing again what the consumer's queue no longer keeps a job of (its policy keeps
   * them a day): each copy arrives under a job id of its own (publish-twice), as a republication
   * does once BullMQ removed the first job.
   */
  let republisher: Publisher;
  let service: Awaited<ReturnType<typeof startInventory>>;
  const prefix = uniqueName('idem_test_inventory');

  beforeAll(async () => {
    service = await startInventory(
      loadConfig({
        DATABASE_URL: database.url,
        IDEM_QUEUE_PREFIX: prefix,
        PORT: '0',
        ADMIN_TOKEN,
        LOG_LEVEL: 'silent',
      }),
    );
    publisher = createPublisher({ catalogue: shop, prefix });
    const twice = createFaults(parseFaultRules('publish-twice target=publisher'));
    republisher = createPublisher({ catalogue: shop, prefix, faults: twice });
  });
  afterAll(async () => {
    await service.stop();
    await Promise.all([publisher.close(), republisher.close()]);
    await deleteQueues(prefix);
  });

  const url = (path: string) => `http://127.0.0.1:${service.http.port}${path}`;

  it('gives the last units to exactly as many concurrent orders as there is stock for', async () => {
    const orders = Array.from({ length: 20 }, () => placed([{ sku: 'mouse', quantity: 1 }]));
    await publisher.publish(orders);
    await waitFor(async () => (await db.processedMessage.count()) === 20, { what: '20 processed orders' });

    expect(await stock('mouse')).toEqual({ available: 0, reserved: 10 });
    expect(await db.reservation.count({ where: { status: 'reserved' } })).toBe(10);
    const types = await outboxTypes();
    expect(types.filter((t) => t === 'inventory.stock-reserved.v1')).toHaveLength(10);
    expect(types.filter((t) => t === 'inventory.stock-rejected.v1')).toHaveLength(10);
  });

  it('counts deliveries by consumer, contract, producer and outcome on /metrics, with no ids in labels', async () => {
    const message = placed([{ sku: 'cable', quantity: 1 }]);
    await publisher.publish([message]);
    await waitFor(async () => (await db.processedMessage.count()) === 1);
    const before = await db.processedMessage.count();
    await republisher.publish([message]); // the relay's accepted duplicate
    const placedDuplicate = {
      consumer: 'inventory.order-placed.v1',
      contract: 'orders.order-placed.v1',
      producer: 'orders',
      outcome: 'duplicate',
    };
    const text = await waitFor(async () => {
      const body = await (await fetch(url('/metrics'))).text();
      return deliveriesLine(body, placedDuplicate) !== undefined && body;
    });
    expect(deliveriesLine(text, placedDuplicate)).toMatch(/ 1$/);
    expect(await db.processedMessage.count()).toBe(before);
    expect(text).toMatch(/^idem_outbox_backlog\{service="inventory"\} \d+$/m);
    expect(text).toContain('idem_delivery_processing_seconds_bucket{');
    // Read from the real Redis, for the alert that fires before Redis (noeviction) is full.
    expect(Number(/^idem_redis_memory_used_bytes\{service="inventory"\} (\d+)$/m.exec(text)?.[1])).toBeGreaterThan(0);
    expect(text).toMatch(/^idem_redis_memory_max_bytes\{service="inventory"\} \d+$/m);

    const labelValues = [...text.matchAll(/="([^"]*)"/g)].map((m) => m[1]!);
    expect(labelValues.filter((v) => /[0-9a-f]{8}-[0-9a-f]{4}-/.test(v) || v.includes('@'))).toEqual([]);

    // The producer label is the one the catalogue names for the contract, never the envelope's free text.
    const processed = { ...placedDuplicate, outcome: 'processed' };
    const processedCount = async () =>
      Number(
        deliveriesLine(await (await fetch(url('/metrics'))).text(), processed)
          ?.split(' ')
          .at(-1) ?? 0,
      );
    const earlier = await processedCount();
    await publisher.publish([{ ...placed([{ sku: 'cable', quantity: 1 }]), producer: 'mallory-was-here' }]);
    await waitFor(async () => (await processedCount()) === earlier + 1, { what: 'the delivery counted under orders' });
    expect(await (await fetch(url('/metrics'))).text()).not.toContain('mallory');
  });

  it('pages dead letters for an operator without their payloads, and gives one payload on request', async () => {
    const deadLetters = createInbox({ db }).deadLetters;
    for (const id of ['dl-a', 'dl-b', 'dl-c']) {
      await deadLetters.record({
        consumer: 'inventory.order-placed.v1',
        messageId: id,
        payload: { id, padding: 'x'.repeat(1000) },
        code: 'malformed_envelope',
        reason: 'test',
        attempts: 1,
      });
    }
    const get = (path: string) =>
      fetch(url(path), { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } }).then(
        (r) => r.json() as Promise<{ deadLetters: Record<string, unknown>[]; next: string | null; payload?: unknown }>,
      );
    const first = await get('/dead-letters?limit=2');
    expect(first.deadLetters.map((d) => d.messageId)).toEqual(['dl-a', 'dl-b']);
    expect(first.deadLetters.every((d) => !('payload' in d) && (d.payloadBytes as number) > 1000)).toBe(true);
    const second = await get(`/dead-letters?limit=2&after=${first.next}`);
    expect(second.deadLetters.map((d) => d.messageId)).toEqual(['dl-c']);
    expect(second.next).toBeNull();
    const one = await get('/dead-letters/payload?consumer=inventory.order-placed.v1&messageId=dl-b');
    expect(one.payload).toEqual({ id: 'dl-b', padding: 'x'.repeat(1000) });
    expect(
      (await fetch(url('/dead-letters?after=garbage'), { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).status,
    ).toBe(400);
    await db.$executeRaw`TRUNCATE dead_letters`;
  });

  it('sets stock only for an operator and shows it to anyone', async () => {
    const put = (token?: string) =>
      fetch(url('/stock/desk'), {
        method: 'PUT',
        headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
        body: JSON.stringify({ available: 3 }),
      });
    expect((await put()).status).toBe(401);
    expect((await put('wrong-token-0123456789')).status).toBe(403);
    expect((await put(ADMIN_TOKEN)).status).toBe(200);
    expect(await (await fetch(url('/stock/desk'))).json()).toEqual({ sku: 'desk', available: 3, reserved: 0 });
    expect((await fetch(url('/stock/nothing-here'))).status).toBe(404);
  });

  it('refuses a negative stock level with 400 naming the field', async () => {
    const res = await fetch(url('/stock/desk'), {
      method: 'PUT',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` },
      body: JSON.stringify({ available: -1 }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ errors: [{ field: 'body.available' }] });
  });

  it('takes order-cancelled v1 and v2 side by side on one queue, under one dedupe key, ready for orders to move to v2', async () => {
    const [first, second] = [placed([{ sku: 'mouse', quantity: 2 }]), placed([{ sku: 'cable', quantity: 3 }])];
    await publisher.publish([first, second]);
    const reserved = await waitFor(async () => (await db.reservation.count({ where: { status: 'reserved' } })) === 2);
    expect(reserved).toBe(true);

    const v1 = cancelled(first.body.orderId, 2);
    const v2: Envelope<'orders.order-cancelled.v2'> = {
      ...cancelled(second.body.orderId, 2),
      type: 'orders.order-cancelled.v2',
      body: { orderId: second.body.orderId, reason: { by: 'operator', text: 'out of stock at the supplier' } },
    };
    await publisher.publish([v1, v2]);
    const released = (orderId: string) => db.reservation.count({ where: { orderId, status: 'released' } });
    await waitFor(async () => (await released(first.body.orderId)) + (await released(second.body.orderId)) === 2, {
      what: 'both orders released, one cancelled in v1 and one in v2',
    });
    expect(await stock('mouse')).toEqual({ available: 10, reserved: 0 });
    expect(await stock('cable')).toEqual({ available: 10, reserved: 0 });

    // One message id in the other version too (a producer must switch, not publish both): the
    // dedupe key (consumer, message_id) spans versions, so it applies nothing, and the changed body is reported.
    const records = () => db.processedMessage.count({ where: { consumer: 'inventory.order-cancelled.v1' } });
    const before = await records();
    await republisher.publish([{ ...v2, messageId: v1.messageId, body: { ...v2.body, orderId: first.body.orderId } }]);
    await waitFor(async () =>
      deliveriesLine(await (await fetch(url('/metrics'))).text(), {
        consumer: 'inventory.order-cancelled.v1',
        contract: 'orders.order-cancelled.v2',
        outcome: 'conflicting_duplicate',
      }),
    );
    expect(await records()).toBe(before);
    expect(await stock('mouse')).toEqual({ available: 10, reserved: 0 });
  });

  it("runs with a hash-tagged queue prefix, as Redis Cluster needs: every key it writes is in the tag's one slot", async () => {
    // Redis Cluster hashes only the part of a key inside its first {…}: with IDEM_QUEUE_PREFIX
    // = {idem}, each queue's keys (and the journal) share a slot, which BullMQ's scripts need.
    const tag = uniqueName('idem_test_tagged');
    const tagged = `{${tag}}`;
    const instance = await startInventory(
      loadConfig({ DATABASE_URL: database.url, IDEM_QUEUE_PREFIX: tagged, PORT: '0', LOG_LEVEL: 'silent' }),
    );
    const taggedPublisher = createPublisher({ catalogue: shop, prefix: tagged });
    const redis = new Redis(redisUrl);
    try {
      await taggedPublisher.publish([placed([{ sku: 'mouse', quantity: 1 }])]);
      await waitFor(async () => (await db.processedMessage.count()) === 1, { what: 'the order processed' });
      expect(await stock('mouse')).toEqual({ available: 9, reserved: 1 });
      const keys = await redis.keys(`*${tag}*`);
      expect(keys.length).toBeGreaterThan(0);
      expect(keys.filter((key) => !key.startsWith(`${tagged}:`))).toEqual([]);
    } finally {
      await instance.stop();
      await taggedPublisher.close();
      redis.disconnect();
      await deleteQueues(tagged);
    }
  });

  it('answers health with its database and Redis checks', async () => {
    expect(await (await fetch(url('/health'))).json()).toEqual({
      status: 'ok',
      checks: { database: 'ok', redis: 'ok' },
    });
  });
});
