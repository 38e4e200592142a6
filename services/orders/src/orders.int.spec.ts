import { randomUUID } from 'node:crypto';
import type { Envelope } from '@idem/shop';
import { DEFAULT_TOKEN_CLAIMS, mintCustomerToken } from '@idem/http';
import { createInbox } from '@idem/inbox';
import {
  deleteQueues,
  finishedOrWaiting,
  held,
  heldTransactions,
  orderPlacedMessage,
  serviceDatabase,
  testMessage,
  uniqueName,
} from '@idem/testkit';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from './config.js';
import { PACKAGE_TABLES } from './tables.js';
import { handlePaymentCaptured } from './consumers/payment-captured.js';
import { handlePaymentFailed } from './consumers/payment-failed.js';
import { handleReservationExpired } from './consumers/reservation-expired.js';
import { handleStockReserved } from './consumers/stock-reserved.js';
import { connectDatabase } from './db.js';
import { cancelOrder } from './application/cancel-order.js';
import { setCatalogItem } from './application/catalog.js';
import { decideCapture, takeCapture } from './application/captures.js';
import { idempotent, purgeExpiredKeys } from './application/idempotency-keys.js';
import { applyTransition, createOrder, decideAndMove, type OrderView } from './application/orders.js';
import {
  placeInOneStatement,
  placeOrder,
  placeThePlainWay,
  type CatalogAsLastRead,
} from './application/place-order.js';
import { ORDER_STATUSES, ORDER_TRIGGERS, type OrderStatus } from './domain/order-status.js';
import { startOrders } from './service.js';

const database = serviceDatabase('orders', {
  root: new URL('../', import.meta.url),
  tables: PACKAGE_TABLES,
  connect: connectDatabase,
  hooks: { beforeAll, afterAll },
});
const { db } = database;
let service: Awaited<ReturnType<typeof startOrders>>;
const prefix = uniqueName('idem_test_orders');
const now = () => new Date();
const JWT_SECRET = 'orders-test-signing-key-0123456789abcdef';
const ADMIN_TOKEN = 'orders-test-operator-token';
/** The settings every orders process in this file starts with. */
const configOf = (env: Record<string, string> = {}) =>
  loadConfig({
    DATABASE_URL: database.url,
    IDEM_QUEUE_PREFIX: prefix,
    PORT: '0',
    LOG_LEVEL: 'silent',
    IDEM_ROLES: 'http',
    JWT_SECRET,
    ADMIN_TOKEN,
    ...env,
  });

/** What the tests order: the service seeds nothing itself (a development system asks for its demo shop). */
const CATALOG = [
  { sku: 'keyboard', name: 'Mechanical keyboard', unitPriceCents: 4999, currency: 'eur' },
  { sku: 'mouse', name: 'Wireless mouse', unitPriceCents: 1999, currency: 'eur' },
  { sku: 'monitor', name: '27" monitor', unitPriceCents: 19999, currency: 'eur' },
  { sku: 'cable', name: 'USB-C cable', unitPriceCents: 999, currency: 'eur' },
] as const;

beforeAll(async () => {
  await db.catalogItem.createMany({ data: CATALOG.map((item) => ({ ...item, updatedAt: now() })) });
  // HTTP only: these tests look at what the API writes, the relay would publish it away.
  service = await startOrders(
    configOf({ RATE_LIMIT_ORDERS_PER_CUSTOMER: '1000', RATE_LIMIT_FAILED_AUTHENTICATIONS_PER_ADDRESS: '1000' }),
  );
});
afterAll(async () => {
  await service.stop();
  await deleteQueues(prefix);
});
beforeEach(async () => {
  await database.empty({ keep: ['catalog_items'] });
});

type OrderJson = OrderView & { history: NonNullable<OrderView['history']> };
const orderOf = async (res: Response) => (await res.json()) as OrderJson;
const pageOf = async (res: Response) => (await res.json()) as { orders: OrderView[]; nextCursor: string | null };

const url = (path: string) => `http://127.0.0.1:${service.http.port}${path}`;
const tokenOf = (
  customerId: string,
  claims: Partial<{ secret: string; issuer: string; audience: string }> = {},
  identity: { email?: string; emailVerified?: boolean } = { email: `${customerId}@example.com` },
) => mintCustomerToken({ secret: JWT_SECRET, ...DEFAULT_TOKEN_CLAIMS, ...claims }, customerId, identity);
/** `Authorization` as a customer, or as the operator. */
const as = async (customerId: string) => ({ authorization: `Bearer ${await tokenOf(customerId)}` });
const operator = { authorization: `Bearer ${ADMIN_TOKEN}` };
/** GET as a caller (the customer ada unless told otherwise). */
const get = async (path: string, auth?: Record<string, string>) =>
  fetch(url(path), { headers: auth ?? (await as('ada')) });
/** SKUs and quantities only: the catalog (seeded with the demo's) decides what they cost. */
const validOrder = () => ({
  paymentMethod: 'pm_card_visa',
  lines: [
    { sku: 'keyboard', quantity: 2 },
    { sku: 'mouse', quantity: 1 },
  ],
});
/** The operator prices a SKU, or withdraws it. */
const setPrice = (
  sku: string,
  item: { name?: string; unitPriceCents: number; currency?: string; withdrawn?: boolean },
) =>
  fetch(url(`/catalog/${sku}`), {
    method: 'PUT',
    headers: { 'content-type': 'application/json', ...operator },
    body: JSON.stringify({ name: sku, currency: 'eur', ...item }),
  });
/** POST as a caller (the customer ada unless the headers carry another `authorization`). */
const post = async (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url(path), {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(await as('ada')), ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
const nothingWritten = async () => {
  expect(await db.order.count()).toBe(0);
  expect(await db.outboxMessage.count()).toBe(0);
  expect(await db.idempotencyKey.count()).toBe(0);
};
const fieldsOf = async (res: Response) =>
  ((await res.json()) as { errors: { field: string; message: string }[] }).errors;

describe('POST /orders', () => {
  it('creates a PENDING order and its order-placed event in one transaction', async () => {
    const res = await post('/orders', validOrder(), { 'x-correlation-id': '7b1f3f2e-4e8f-4a8e-9d8e-2f1f3f2e4e8f' });
    expect(res.status).toBe(201);
    const order = await orderOf(res);
    expect(order).toMatchObject({
      status: 'PENDING',
      version: 1,
      totalCents: 11997,
      currency: 'eur',
      customerEmail: 'ada@example.com',
      lines: [
        { sku: 'keyboard', quantity: 2, unitPriceCents: 4999 },
        { sku: 'mouse', quantity: 1, unitPriceCents: 1999 },
      ],
    });
    const [event] = await db.outboxMessage.findMany();
    expect(event!.envelope).toMatchObject({
      type: 'orders.order-placed.v1',
      aggregateId: order.orderId,
      aggregateVersion: 1,
      correlationId: '7b1f3f2e-4e8f-4a8e-9d8e-2f1f3f2e4e8f',
      causationId: null,
      body: { orderId: order.orderId, totalCents: 11997, lines: order.lines, customerEmail: 'ada@example.com' },
    });
  });

  it.each([
    ['a missing field', { ...validOrder(), lines: undefined }, 'body.lines'],
    ['a zero quantity', { ...validOrder(), lines: [{ sku: 'a', quantity: 0 }] }, 'body.lines[0].quantity'],
    ['a negative quantity', { ...validOrder(), lines: [{ sku: 'a', quantity: -2 }] }, 'body.lines[0].quantity'],
    [
      'a SKU that is not a plain name (it is echoed in the order email)',
      { ...validOrder(), lines: [{ sku: 'Click <a href="http://x">here</a>', quantity: 1 }] },
      'body.lines[0].sku',
    ],
    ['more than 100 lines', { ...validOrder(), lines: Array(101).fill({ sku: 'a', quantity: 1 }) }, 'body.lines'],
    ['a field no order has', { ...validOrder(), discount: 90 }, 'body'],
    ['a NUL character in any text', { ...validOrder(), paymentMethod: 'pm_card_visa\u0000' }, 'body.paymentMethod'],
    ['a lone surrogate in any text', { ...validOrder(), paymentMethod: 'pm_\ud800' }, 'body.paymentMethod'],
    [
      'a payment method that can never be one',
      { ...validOrder(), paymentMethod: 'card 4242 4242' },
      'body.paymentMethod',
    ],
  ])('refuses %s with 400 naming the field, writing nothing', async (_what, body, field) => {
    const res = await post('/orders', body);
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/application\/problem\+json/);
    expect(((await res.json()) as { errors: { field: string }[] }).errors).toContainEqual(
      expect.objectContaining({ field }),
    );
    await nothingWritten();
  });

  it.each([
    [
      "a line's unit price",
      { lines: [{ sku: 'keyboard', quantity: 5, unitPriceCents: 10 }] },
      'body.lines[0].unitPriceCents',
      /catalog/,
    ],
    ['a total', { ...validOrder(), totalCents: 50 }, 'body.totalCents', /catalog/],
    ['a currency', { ...validOrder(), currency: 'eur' }, 'body.currency', /catalog/],
    ['a receipt address', { ...validOrder(), customerEmail: 'victim@example.com' }, 'body.customerEmail', /token/],
  ])(
    'refuses %s sent by the client with 400 saying who decides it, writing nothing',
    async (_what, body, field, says) => {
      const res = await post('/orders', body, { 'idempotency-key': randomUUID() });
      expect(res.status).toBe(400);
      expect(await fieldsOf(res)).toContainEqual({ field, message: expect.stringMatching(says) });
      await nothingWritten();
    },
  );

  it.each([
    [
      'an unknown SKU',
      [
        { sku: 'keyboard', quantity: 1 },
        { sku: 'unicorn', quantity: 1 },
      ],
      'body.lines[1]',
      /not in the catalog/,
    ],
    ['a withdrawn SKU', [{ sku: 'floppy', quantity: 1 }], 'body.lines[0]', /withdrawn/],
    [
      'lines in two currencies',
      [
        { sku: 'keyboard', quantity: 1 },
        { sku: 'bagel', quantity: 1 },
      ],
      'body.lines[1]',
      /USD/,
    ],
  ])(
    'answers 422 to %s, naming the line, writing nothing (not even the Idempotency-Key)',
    async (_what, lines, field, says) => {
      expect((await setPrice('floppy', { unitPriceCents: 99, withdrawn: true })).status).toBe(200);
      expect((await setPrice('bagel', { unitPriceCents: 300, currency: 'usd' })).status).toBe(200);
      const res = await post('/orders', { lines }, { 'idempotency-key': randomUUID() });
      expect(res.status).toBe(422);
      expect(await res.clone().json()).toMatchObject({ code: 'order_refused' });
      expect(await fieldsOf(res)).toEqual([{ field, message: expect.stringMatching(says) }]);
      await nothingWritten();
    },
  );

  it('keeps the prices an order was placed at when the catalog changes after', async () => {
    const placed = await orderOf(await post('/orders', validOrder()));
    expect((await setPrice('keyboard', { unitPriceCents: 1 })).status).toBe(200);
    try {
      const now = await orderOf(await get(`/orders/${placed.orderId}`));
      expect(now).toMatchObject({ totalCents: 11997, lines: placed.lines });
      const [event] = await db.outboxMessage.findMany();
      expect(event!.envelope).toMatchObject({ body: { totalCents: 11997, lines: placed.lines } });
      // The next order pays the new price.
      expect(await orderOf(await post('/orders', validOrder()))).toMatchObject({ totalCents: 2 + 1999 });
    } finally {
      await setPrice('keyboard', { name: 'Mechanical keyboard', unitPriceCents: 4999 });
    }
  });

  it("sends the receipt to the token's email: none answers 403, an unverified one 401, writing nothing", async () => {
    const without = await post('/orders', validOrder(), { authorization: `Bearer ${await tokenOf('ada', {}, {})}` });
    expect(without.status).toBe(403);
    expect(await without.json()).toMatchObject({ detail: expect.stringMatching(/email claim/) });
    const unverified = await tokenOf('ada', {}, { email: 'ada@example.com', emailVerified: false });
    const res = await post('/orders', validOrder(), { authorization: `Bearer ${unverified}` });
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ detail: expect.stringMatching(/not verified/) });
    await nothingWritten();
  });

  it('refuses a body that is not JSON (400) or too large (413), writing nothing', async () => {
    expect((await post('/orders', '{"lines":')).status).toBe(400);
    const huge = { ...validOrder(), paymentMethod: 'x'.repeat(100_000) };
    expect((await post('/orders', huge)).status).toBe(413);
    await nothingWritten();
  });
});

describe('the catalog', () => {
  it('is readable by anyone, and priced (or withdrawn) by the operator only', async () => {
    const catalog = (await (await fetch(url('/catalog'))).json()) as { items: { sku: string }[] };
    // What this file put in the catalog (other tests here price a few more).
    expect(catalog.items.map((i) => i.sku)).toEqual(expect.arrayContaining(['cable', 'keyboard', 'monitor', 'mouse']));
    expect(await (await fetch(url('/catalog/keyboard'))).json()).toMatchObject({
      sku: 'keyboard',
      unitPriceCents: 4999,
      currency: 'eur',
      withdrawn: false,
    });
    const asAda = await fetch(url('/catalog/keyboard'), {
      method: 'PUT',
      headers: { 'content-type': 'application/json', ...(await as('ada')) },
      body: JSON.stringify({ name: 'cheap', unitPriceCents: 1, currency: 'eur' }),
    });
    expect(asAda.status).toBe(403);
    expect((await setPrice('lamp', { unitPriceCents: 2500, withdrawn: true })).status).toBe(200);
    const listed = (await (await fetch(url('/catalog'))).json()) as { items: { sku: string }[] };
    expect(listed.items.map((i) => i.sku)).not.toContain('lamp');
    expect(await (await fetch(url('/catalog/lamp'))).json()).toMatchObject({ withdrawn: true });
    expect((await fetch(url('/catalog/nothing'))).status).toBe(404);
    expect(await (await fetch(url('/catalog/keyboard'))).json()).toMatchObject({ unitPriceCents: 4999 });
  });
});

describe('Idempotency-Key', () => {
  it('replays the original response for a repeat with the same key and body, creating nothing new', async () => {
    const first = await post('/orders', validOrder(), { 'idempotency-key': 'key-1' });
    const again = await post('/orders', validOrder(), { 'idempotency-key': 'key-1' });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    expect(await again.json()).toEqual(await first.json());
    expect(await db.order.count()).toBe(1);
    expect(await db.outboxMessage.count()).toBe(1);
  });

  it('answers 422 when the key is reused with a different body', async () => {
    await post('/orders', validOrder(), { 'idempotency-key': 'key-2' });
    const res = await post(
      '/orders',
      { ...validOrder(), paymentMethod: 'pm_card_mastercard' },
      { 'idempotency-key': 'key-2' },
    );
    expect(res.status).toBe(422);
    expect(await res.json()).toMatchObject({ code: 'idempotency_key_reused' });
    expect(await db.order.count()).toBe(1);
  });

  it('answers 409 while a request with the same key is still in flight', async () => {
    // Hold the key's lock as the first request's transaction would, and send the repeat.
    let release!: () => void;
    const holding = new Promise<void>((resolve) => (release = resolve));
    let locked!: () => void;
    const isLocked = new Promise<void>((resolve) => (locked = resolve));
    const inFlight = db.$transaction(async (tx) => {
      await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtextextended(${JSON.stringify(['idempotency', 'ada', 'key-3'])}, 0))`;
      locked();
      await holding;
    });
    await isLocked;
    const res = await post('/orders', validOrder(), { 'idempotency-key': 'key-3' });
    release();
    await inFlight;
    expect(res.status).toBe(409);
    expect(await res.json()).toMatchObject({ code: 'idempotency_key_in_flight' });
    expect((await post('/orders', validOrder(), { 'idempotency-key': 'key-3' })).status).toBe(201);
  });

  it('keeps a key revived while the purge waits on its row, so a retry with it places no second order', async () => {
    const first = await post('/orders', validOrder(), { 'idempotency-key': 'key-revived' });
    const expired = { key: 'key-revived' };
    await db.idempotencyKey.updateMany({ where: expired, data: { expiresAt: new Date(Date.now() - 1_000) } });
    const purgeAt = new Date();
    let purging!: Promise<number>;
    // A request with the key writes its record anew (a live expiry) and holds the row while the
    // purge, which found the key expired, waits for it.
    await db.$transaction(async (tx) => {
      await tx.idempotencyKey.updateMany({ where: expired, data: { expiresAt: new Date(Date.now() + 3_600_000) } });
      purging = purgeExpiredKeys(db, purgeAt);
      await finishedOrWaiting(db, purging);
    });
    expect(await purging).toBe(0);
    const retry = await post('/orders', validOrder(), { 'idempotency-key': 'key-revived' });
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(await retry.json()).toEqual(await first.json());
    expect(await db.order.count()).toBe(1);
  });

  it('places one order for a key sent many times at once, its first answer to every repeat that gets one', async () => {
    for (const round of [1, 2, 3]) {
      await database.empty({ keep: ['catalog_items'] });
      const key = `key-race-${round}`;
      // Half of them with another body: those may only be refused (422) or told to wait (409).
      const bodies = Array.from({ length: 8 }, (_, i) =>
        i % 2 ? validOrder() : { ...validOrder(), paymentMethod: 'pm_card_mastercard' },
      );
      const answers = await Promise.all(
        bodies.map(async (body) => {
          const res = await post('/orders', body, { 'idempotency-key': key });
          return { body, status: res.status, replayed: res.headers.get('idempotent-replayed'), json: await res.json() };
        }),
      );
      expect(await db.order.count()).toBe(1);
      expect(await db.outboxMessage.count()).toBe(1);
      expect(await db.idempotencyKey.count()).toBe(1);
      const [order] = await db.order.findMany();
      const placed = answers.filter((a) => a.status === 201);
      expect(placed.filter((a) => a.replayed === null)).toHaveLength(1);
      for (const answer of placed) expect((answer.json as OrderView).orderId).toBe(order!.id);
      const winner = placed.find((a) => a.replayed === null)!.body;
      for (const answer of answers.filter((a) => a.status !== 201)) {
        expect([409, 422]).toContain(answer.status);
        if (answer.status === 422) expect(answer.body).not.toEqual(winner);
      }
      for (const answer of placed) expect(answer.body).toEqual(winner);
    }
  });
});

describe('reading and cancelling orders', () => {
  const place = async () => orderOf(await post('/orders', validOrder()));

  it('shows an order with its lines and status history', async () => {
    const { orderId } = await place();
    const res = await get(`/orders/${orderId}`);
    expect(await orderOf(res)).toMatchObject({
      orderId,
      customerId: 'ada',
      status: 'PENDING',
      lines: [{ sku: 'keyboard' }, { sku: 'mouse' }],
      history: [{ version: 1, status: 'PENDING', causationId: null }],
    });
    expect((await get(`/orders/${randomUUID()}`)).status).toBe(404);
    expect((await get('/orders/not-a-uuid')).status).toBe(400);
  });

  it('lists recent orders page by page', async () => {
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push((await place()).orderId);
    const first = await pageOf(await get('/orders?limit=3'));
    const second = await pageOf(await get(`/orders?limit=3&cursor=${first.nextCursor}`));
    const listed = [...first.orders, ...second.orders].map((o) => o.orderId);
    expect(new Set(listed)).toEqual(new Set(ids));
    expect(second.nextCursor).toBeNull();
  });

  it('cancels an order once, publishing order-cancelled with the new version', async () => {
    const { orderId } = await place();
    const res = await post(`/orders/${orderId}/cancel`, {});
    expect(await res.json()).toMatchObject({ status: 'CANCELLED', version: 2 });
    expect(await (await post(`/orders/${orderId}/cancel`, {})).json()).toMatchObject({
      status: 'CANCELLED',
      version: 2,
    });
    const events = await db.outboxMessage.findMany({ where: { type: 'orders.order-cancelled.v1' } });
    expect(events.map((e) => e.envelope)).toEqual([
      expect.objectContaining({ aggregateId: orderId, aggregateVersion: 2 }),
    ]);
  });

  it('refuses to cancel an order that was rejected', async () => {
    const { orderId } = await place();
    await db.order.update({ where: { id: orderId }, data: { status: 'REJECTED' } });
    const res = await post(`/orders/${orderId}/cancel`, {});
    expect(res.status).toBe(409);
  });
});

describe('callers own what they create', () => {
  const placeAs = async (customerId: string, headers: Record<string, string> = {}) =>
    post('/orders', validOrder(), { ...(await as(customerId)), ...headers });

  it.each([
    ['no Authorization', async () => ({})],
    [
      'a token signed with another key',
      async () => ({ authorization: `Bearer ${await tokenOf('ada', { secret: 'x'.repeat(40) })}` }),
    ],
    [
      'a token for another audience',
      async () => ({ authorization: `Bearer ${await tokenOf('ada', { audience: 'payments' })}` }),
    ],
    [
      'a token from another issuer',
      async () => ({ authorization: `Bearer ${await tokenOf('ada', { issuer: 'evil' })}` }),
    ],
    [
      'an expired token',
      async () => ({
        authorization: `Bearer ${await mintCustomerToken({ secret: JWT_SECRET, ...DEFAULT_TOKEN_CLAIMS }, 'ada', { expiresIn: '-1m' })}`,
      }),
    ],
    ['an unsigned token', async () => ({ authorization: `Bearer ${unsigned('ada')}` })],
    ['a wrong operator token', async () => ({ authorization: 'Bearer not-the-operator-token' })],
  ])('answers 401 with a Bearer challenge to %s, on every route, writing nothing', async (_what, auth) => {
    const headers = await auth();
    const { orderId } = await orderOf(await placeAs('ada'));
    for (const res of [
      await fetch(url('/orders'), {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(validOrder()),
      }),
      await get('/orders', headers),
      await get(`/orders/${orderId}`, headers),
      await fetch(url(`/orders/${orderId}/cancel`), { method: 'POST', headers }),
    ]) {
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toMatch(/^Bearer /);
      expect(await res.json()).toMatchObject({ code: 'unauthorized' });
    }
    expect(await db.order.count()).toBe(1);
    expect((await db.order.findUniqueOrThrow({ where: { id: orderId } })).status).toBe('PENDING');
  });

  it("answers 404 for another customer's order, to read it or cancel it, and changes nothing", async () => {
    const { orderId } = await orderOf(await placeAs('ada'));
    const bob = await as('bob');
    expect((await get(`/orders/${orderId}`, bob)).status).toBe(404);
    const cancel = await fetch(url(`/orders/${orderId}/cancel`), { method: 'POST', headers: bob });
    expect(cancel.status).toBe(404);
    expect((await db.order.findUniqueOrThrow({ where: { id: orderId } })).status).toBe('PENDING');
    expect(await db.outboxMessage.count({ where: { type: 'orders.order-cancelled.v1' } })).toBe(0);
  });

  it("lists the caller's own orders; the operator lists, reads and cancels every order but places none", async () => {
    const adas = [(await orderOf(await placeAs('ada'))).orderId, (await orderOf(await placeAs('ada'))).orderId];
    const bobs = (await orderOf(await placeAs('bob'))).orderId;
    const idsOf = async (auth: Record<string, string>) =>
      (await pageOf(await get('/orders', auth))).orders.map((o) => o.orderId).sort();
    expect(await idsOf(await as('ada'))).toEqual([...adas].sort());
    expect(await idsOf(await as('bob'))).toEqual([bobs]);
    expect(await idsOf(await as('carol'))).toEqual([]);
    expect(await idsOf(operator)).toEqual([...adas, bobs].sort());

    expect(await orderOf(await get(`/orders/${bobs}`, operator))).toMatchObject({ customerId: 'bob' });
    const cancel = await fetch(url(`/orders/${bobs}/cancel`), { method: 'POST', headers: operator });
    expect(await cancel.json()).toMatchObject({ status: 'CANCELLED' });
    const placed = await post('/orders', validOrder(), operator);
    expect(placed.status).toBe(403);
    expect(await db.order.count()).toBe(3);
  });

  it('scopes an Idempotency-Key per customer: the same key and body from two customers are two orders', async () => {
    const key = { 'idempotency-key': 'shared-key' };
    const ada = await placeAs('ada', key);
    const bob = await placeAs('bob', key);
    expect([ada.status, bob.status]).toEqual([201, 201]);
    expect(bob.headers.get('idempotent-replayed')).toBeNull();
    const [first, second] = [await orderOf(ada), await orderOf(bob)];
    expect(first.orderId).not.toBe(second.orderId);
    expect(second.customerId).toBe('bob');
    // ... and each customer's repeat still replays their own.
    expect((await orderOf(await placeAs('bob', key))).orderId).toBe(second.orderId);
    expect(await db.order.count()).toBe(2);
  });

  it('rate-limits POST /orders per customer and per address, counted across instances in Redis, with Retry-After', async () => {
    // Two instances share the limits through Redis: alternate between them.
    const limited = {
      RATE_LIMIT_ORDERS_PER_CUSTOMER: '3',
      RATE_LIMIT_ORDERS_PER_ADDRESS: '5',
      RATE_LIMIT_WINDOW_MS: '60000',
      IDEM_QUEUE_PREFIX: uniqueName('idem_test_limits'),
    };
    const instances = [await startOrders(configOf(limited)), await startOrders(configOf(limited))];
    try {
      const placeOn = async (i: number, customerId: string) =>
        fetch(`http://127.0.0.1:${instances[i % 2]!.http.port}/orders`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(await as(customerId)) },
          body: JSON.stringify(validOrder()),
        });
      const dana = [];
      for (let i = 0; i < 4; i++) dana.push(await placeOn(i, 'dana'));
      expect(dana.map((r) => r.status)).toEqual([201, 201, 201, 429]);
      const refused = dana[3]!;
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(refused.headers.get('content-type')).toMatch(/application\/problem\+json/);
      expect(await refused.json()).toMatchObject({ status: 429, code: 'rate_limited' });
      // Another customer from the same address: two more fit under the address's 5, then 429.
      const eve = [await placeOn(0, 'eve'), await placeOn(1, 'eve'), await placeOn(0, 'eve')];
      expect(eve.map((r) => r.status)).toEqual([201, 201, 429]);
      expect(await db.order.count()).toBe(5);
      // Reads are not limited.
      expect(
        (await fetch(`http://127.0.0.1:${instances[0]!.http.port}/orders`, { headers: await as('dana') })).status,
      ).toBe(200);
    } finally {
      await Promise.all(instances.map((i) => i.stop()));
    }
  });
});

describe('limits behind a proxy, and on cancels', () => {
  /** An HTTP-only orders instance with these settings and rate-limit keys of its own. */
  const instance = (env: Record<string, string>) =>
    startOrders(configOf({ IDEM_QUEUE_PREFIX: uniqueName('idem_test_limits'), RATE_LIMIT_WINDOW_MS: '60000', ...env }));
  const placeVia = async (port: number, customerId: string, forwardedFor: string) =>
    (
      await fetch(`http://127.0.0.1:${port}/orders`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': forwardedFor, ...(await as(customerId)) },
        body: JSON.stringify(validOrder()),
      })
    ).status;

  it('counts each client behind a trusted proxy on its own, and believes no untrusted hop', async () => {
    const limits = { RATE_LIMIT_ORDERS_PER_ADDRESS: '2', RATE_LIMIT_ORDERS_PER_CUSTOMER: '100' };
    // The test's requests come from 127.0.0.1: a trusted proxy when TRUST_PROXY names loopback.
    const trusting = await instance({ ...limits, TRUST_PROXY: 'loopback' });
    const untrusting = await instance({ ...limits, TRUST_PROXY: '10.0.0.0/8' });
    try {
      const behind = trusting.http.port;
      expect([
        await placeVia(behind, 'c1', '203.0.113.1'),
        await placeVia(behind, 'c2', '203.0.113.1'),
        await placeVia(behind, 'c3', '203.0.113.1'),
        await placeVia(behind, 'c4', '203.0.113.2'),
      ]).toEqual([201, 201, 429, 201]);
      const direct = untrusting.http.port;
      expect([
        await placeVia(direct, 'c5', '203.0.113.1'),
        await placeVia(direct, 'c6', '203.0.113.2'),
        await placeVia(direct, 'c7', '203.0.113.3'), // a forged header changes nothing
      ]).toEqual([201, 201, 429]);
    } finally {
      await Promise.all([trusting.stop(), untrusting.stop()]);
    }
  });

  it('limits cancels per caller', async () => {
    const limited = await instance({ RATE_LIMIT_CANCELS_PER_CUSTOMER: '2' });
    try {
      const { orderId } = await orderOf(await post('/orders', validOrder()));
      const cancel = async () =>
        (
          await fetch(`http://127.0.0.1:${limited.http.port}/orders/${orderId}/cancel`, {
            method: 'POST',
            headers: await as('ada'),
          })
        ).status;
      expect([await cancel(), await cancel(), await cancel()]).toEqual([200, 200, 429]);
    } finally {
      await limited.stop();
    }
  });
});

describe('failed authentications: limited per address and per claimed customer, never a right token', () => {
  /** An orders instance with the default limit on failures (20 a minute) and counters of its own. */
  const instance = (env: Record<string, string> = {}) =>
    startOrders(configOf({ IDEM_QUEUE_PREFIX: uniqueName('idem_test_failures'), ...env }));
  const statusOf = async (port: number, path: string, headers: Record<string, string> = {}) =>
    (await fetch(`http://127.0.0.1:${port}${path}`, { headers })).status;
  const repeat = async (times: number, send: () => Promise<number>) => {
    const statuses: number[] = [];
    for (let i = 0; i < times; i++) statuses.push(await send());
    return statuses;
  };

  it("answers requests without credentials 401 and counts them against nobody: 25 of them, then the operator's token and a customer's from that address are answered", async () => {
    const limited = await instance();
    try {
      const port = limited.http.port;
      // What a page anywhere can make a browser on this machine send (`no-cors`), as often as it likes.
      const bare = await repeat(25, () => statusOf(port, '/orders'));
      const bareOperator = await repeat(25, () => statusOf(port, '/dead-letters'));
      expect(new Set([...bare, ...bareOperator])).toEqual(new Set([401]));
      expect(await statusOf(port, '/dead-letters', operator)).toBe(200);
      expect(await statusOf(port, '/orders', operator)).toBe(200);
      expect(await statusOf(port, '/orders', await as('ada'))).toBe(200);
      // Nor did they spend the failures' budget: a wrong token is still told it is wrong.
      expect(await statusOf(port, '/dead-letters', { authorization: 'Bearer not-the-operator-token' })).toBe(403);
    } finally {
      await limited.stop();
    }
  });

  it('answers a right token after 25 wrong ones from its address, and past the limit only failures get 429', async () => {
    const limited = await instance();
    try {
      const port = limited.http.port;
      const wrong = (i: number) => ({ authorization: `Bearer wrong-operator-token-${i}` });
      let i = 0;
      const guesses = await repeat(25, () => statusOf(port, '/dead-letters', wrong(i++)));
      expect(guesses).toEqual([...Array<number>(20).fill(403), ...Array<number>(5).fill(429)]);
      expect(await statusOf(port, '/dead-letters', operator)).toBe(200);
      expect(await statusOf(port, '/orders', await as('ada'))).toBe(200);
      // A bad customer token and a wrong operator token count together, on any route.
      const refused = await fetch(`http://127.0.0.1:${port}/orders`, { headers: { authorization: 'Bearer guess' } });
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(await refused.json()).toMatchObject({ status: 429, code: 'rate_limited' });
      expect(await statusOf(port, '/dead-letters', wrong(99))).toBe(429);
      expect(await statusOf(port, '/dead-letters', operator)).toBe(200);
    } finally {
      await limited.stop();
    }
  });

  it('counts guesses sent all at once: only the limit is told "wrong", the rest 429, and a right token among them is answered', async () => {
    const limited = await instance({ RATE_LIMIT_FAILED_AUTHENTICATIONS_PER_ADDRESS: '3' });
    try {
      const port = limited.http.port;
      const [right, ...wrong] = await Promise.all([
        statusOf(port, '/dead-letters', operator),
        ...Array.from({ length: 40 }, (_, i) =>
          statusOf(port, '/dead-letters', { authorization: `Bearer guess-${i}` }),
        ),
      ]);
      expect(wrong.filter((status) => status === 403)).toHaveLength(3); // told "wrong" three times, no more
      expect(wrong.filter((status) => status === 429)).toHaveLength(37);
      expect(right).toBe(200);
      expect(await statusOf(port, '/dead-letters', operator)).toBe(200);
    } finally {
      await limited.stop();
    }
  });

  /** Behind a trusted proxy, where each X-Forwarded-For is a client address of its own; 3 failures each. */
  const behindProxy = () =>
    instance({
      TRUST_PROXY: 'loopback',
      RATE_LIMIT_FAILED_AUTHENTICATIONS_PER_CUSTOMER: '3',
      RATE_LIMIT_FAILED_AUTHENTICATIONS_PER_ADDRESS: '3',
    });
  const from = (address: string, authorization: string) => ({ 'x-forwarded-for': address, authorization });

  it("limits forged tokens per customer they claim to be, from any address, and never the customer's own", async () => {
    const limited = await behindProxy();
    try {
      const port = limited.http.port;
      const forged = await tokenOf('ada', { secret: 'not-the-orders-signing-key-0123456789' });
      let address = 0;
      const forgeries = await repeat(4, () =>
        statusOf(port, '/orders', from(`203.0.113.${++address}`, `Bearer ${forged}`)),
      );
      expect(forgeries).toEqual([401, 401, 401, 429]);
      // Ada herself, from any address, is answered; her own token, expired, is told so (it is no forgery).
      expect(await statusOf(port, '/orders', from('203.0.113.251', `Bearer ${await tokenOf('ada')}`))).toBe(200);
      const expired = await mintCustomerToken({ secret: JWT_SECRET, ...DEFAULT_TOKEN_CLAIMS }, 'ada', {
        expiresIn: '-1m',
        email: 'ada@example.com',
      });
      expect(await statusOf(port, '/orders', from('203.0.113.252', `Bearer ${expired}`))).toBe(401);
      // Past both limits at once (an address that kept forging ada's), still one 429 each.
      const spent = await repeat(4, () => statusOf(port, '/orders', from('203.0.113.9', `Bearer ${forged}`)));
      expect(spent).toEqual([429, 429, 429, 429]);
      // A forgery claiming another customer, from a fresh address, is still only told it is wrong.
      const bob = await tokenOf('bob', { secret: 'not-the-orders-signing-key-0123456789' });
      expect(await statusOf(port, '/orders', from('203.0.113.253', `Bearer ${bob}`))).toBe(401);
    } finally {
      await limited.stop();
    }
  });

  it('counts no forgery against its customer once its address is past its limit', async () => {
    const limited = await behindProxy();
    try {
      const port = limited.http.port;
      const spend = await repeat(3, () => statusOf(port, '/orders', from('203.0.113.7', 'Bearer guess')));
      expect(spend).toEqual([401, 401, 401]);
      const grace = await tokenOf('grace', { secret: 'not-the-orders-signing-key-0123456789' });
      const past = await repeat(5, () => statusOf(port, '/orders', from('203.0.113.7', `Bearer ${grace}`)));
      expect(past).toEqual([429, 429, 429, 429, 429]);
      // Grace's count was left alone: a forgery of hers from elsewhere is only told it is wrong.
      expect(await statusOf(port, '/orders', from('203.0.113.8', `Bearer ${grace}`))).toBe(401);
    } finally {
      await limited.stop();
    }
  });
});

/** A token with `alg: none`: jose refuses it whatever its claims. */
function unsigned(customerId: string): string {
  const part = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const { issuer: iss, audience: aud } = DEFAULT_TOKEN_CLAIMS;
  return `${part({ alg: 'none' })}.${part({ sub: customerId, iss, aud, exp: Math.floor(Date.now() / 1000) + 600 })}.`;
}

const inbox = () => createInbox({ db });
const event = <T extends 'inventory.stock-reserved.v1' | 'payments.payment-captured.v1'>(
  type: T,
  body: Envelope<T>['body'],
): Envelope<T> => ({ ...orderPlacedMessage(), type, producer: type.split('.')[0]!, body }) as Envelope<T>;
const reserved = (orderId: string) =>
  event('inventory.stock-reserved.v1', {
    orderId,
    lines: [{ sku: 'keyboard', quantity: 1 }],
    payment: { amountCents: 100, currency: 'eur', method: 'pm_card_visa' },
  });

describe('orders consumers', () => {
  it('moves the order on each event, records the causing message, and ignores the redelivery', async () => {
    const { orderId } = await orderOf(await post('/orders', validOrder()));
    const message = reserved(orderId);
    const handler = handleStockReserved({ now });
    expect(await inbox().consume('orders.stock-reserved.v1', message, handler)).toEqual({ outcome: 'processed' });
    expect(await inbox().consume('orders.stock-reserved.v1', message, handler)).toEqual({ outcome: 'duplicate' });
    const captured = event('payments.payment-captured.v1', {
      orderId,
      paymentIntentId: 'pi_1',
      amountCents: 11997,
      currency: 'eur',
    });
    await inbox().consume('orders.payment-captured.v1', captured, handlePaymentCaptured({ now }));

    const order = await orderOf(await get(`/orders/${orderId}`));
    expect(order).toMatchObject({ status: 'PAID', version: 3 });
    expect(order.history.map((h) => [h.status, h.causationId])).toEqual([
      ['PENDING', null],
      ['RESERVED', message.messageId],
      ['PAID', captured.messageId],
    ]);
  });

  it('classifies an event that no longer applies (stock reserved for a cancelled order) as stale', async () => {
    const { orderId } = await orderOf(await post('/orders', validOrder()));
    await post(`/orders/${orderId}/cancel`, {});
    const outcome = await inbox().consume('orders.stock-reserved.v1', reserved(orderId), handleStockReserved({ now }));
    expect(outcome).toMatchObject({ outcome: 'stale', reason: expect.stringContaining('CANCELLED') });
    expect(await db.order.findUniqueOrThrow({ where: { id: orderId } })).toMatchObject({
      status: 'CANCELLED',
      version: 2,
    });
  });

  it('applies a payment that overtook its stock-reserved, and then treats the stock-reserved as stale', async () => {
    const { orderId } = await orderOf(await post('/orders', validOrder()));
    const captured = event('payments.payment-captured.v1', {
      orderId,
      paymentIntentId: 'pi_2',
      amountCents: 11997,
      currency: 'eur',
    });
    expect(await inbox().consume('orders.payment-captured.v1', captured, handlePaymentCaptured({ now }))).toEqual({
      outcome: 'processed',
    });
    expect(
      await inbox().consume('orders.stock-reserved.v1', reserved(orderId), handleStockReserved({ now })),
    ).toMatchObject({
      outcome: 'stale',
    });
    expect(await db.order.findUniqueOrThrow({ where: { id: orderId } })).toMatchObject({ status: 'PAID', version: 2 });
  });

  const capture = (orderId: string, amountCents = 11997, currency = 'eur') =>
    testMessage('payments.payment-captured.v1', {
      aggregateId: orderId,
      aggregateVersion: 2,
      body: { orderId, paymentIntentId: `pi_${randomUUID()}`, amountCents, currency },
    });
  const consumeCapture = (message: Envelope<'payments.payment-captured.v1'>) =>
    inbox().consume('orders.payment-captured.v1', message, handlePaymentCaptured({ now }));
  const cancellationsOf = async (orderId: string) =>
    (await db.outboxMessage.findMany({ where: { type: 'orders.order-cancelled.v1' }, orderBy: { position: 'asc' } }))
      .map((row) => row.envelope as Envelope<'orders.order-cancelled.v1'>)
      .filter((envelope) => envelope.body.orderId === orderId);
  const refusalsGauge = async () =>
    (await (await fetch(url('/metrics'))).text())
      .split('\n')
      .filter((line) => line.startsWith('idem_orders_refused_captures{'));

  it("refuses a capture that is not the order's total: the order is cancelled, the refund asked for, the refusal counted", async () => {
    const { orderId } = await orderOf(await post('/orders', validOrder()));
    const wrong = capture(orderId, 1199, 'eur');
    expect(await consumeCapture(wrong)).toEqual({ outcome: 'processed' });
    const order = await orderOf(await get(`/orders/${orderId}`));
    expect(order).toMatchObject({ status: 'CANCELLED', version: 2 });
    expect(order.history.at(-1)).toMatchObject({
      causationId: wrong.messageId,
      reason: expect.stringContaining("was not the order's total"),
    });
    // The cancellation payments refunds on, caused by the capture, carrying the order's new version.
    expect(await cancellationsOf(orderId)).toEqual([
      expect.objectContaining({ aggregateVersion: 2, causationId: wrong.messageId }),
    ]);
    expect(await db.refusedCapture.findMany({ where: { orderId } })).toEqual([
      expect.objectContaining({ refusal: 'mischarged', amountCents: 1199, orderStatus: 'PENDING' }),
    ]);
    expect(await refusalsGauge()).toContainEqual(expect.stringMatching(/refusal="mischarged".* 1$/));
    // Another currency is as wrong as another amount.
    const { orderId: other } = await orderOf(await post('/orders', validOrder()));
    await consumeCapture(capture(other, 11997, 'usd'));
    expect((await db.order.findUniqueOrThrow({ where: { id: other } })).status).toBe('CANCELLED');
  });

  it('asks again for the refund of a capture that reaches a cancelled order: a cancelled order keeps no money', async () => {
    const { orderId } = await orderOf(await post('/orders', validOrder()));
    await post(`/orders/${orderId}/cancel`, {});
    const late = capture(orderId);
    expect(await consumeCapture(late)).toEqual({ outcome: 'processed' });
    expect(await db.order.findUniqueOrThrow({ where: { id: orderId } })).toMatchObject({
      status: 'CANCELLED',
      version: 2,
    });
    const [first, again] = await cancellationsOf(orderId);
    expect(again).toMatchObject({ aggregateVersion: first!.aggregateVersion, causationId: late.messageId });
    expect(await db.refusedCapture.findMany({ where: { orderId } })).toEqual([
      expect.objectContaining({ refusal: 'not_payable', orderStatus: 'CANCELLED' }),
    ]);
  });

  it('refunds a capture for an order it never had: no order keeps the money a forged reservation took', async () => {
    const never = randomUUID();
    const forged = capture(never, 99_999);
    expect(await consumeCapture(forged)).toEqual({ outcome: 'processed' });
    expect(await db.order.findUnique({ where: { id: never } })).toBeNull();
    expect(await cancellationsOf(never)).toEqual([
      expect.objectContaining({ causationId: forged.messageId, body: expect.objectContaining({ orderId: never }) }),
    ]);
    expect(await db.refusedCapture.findMany({ where: { orderId: never } })).toEqual([
      expect.objectContaining({ refusal: 'unknown_order', amountCents: 99_999, orderStatus: 'UNKNOWN' }),
    ]);
  });

  it('serialises a cancel and a capture on the order row: the capture held before its commit, the cancel waits and sees PAID', async () => {
    const { orderId } = await orderOf(await post('/orders', validOrder()));
    const capturing = held(handlePaymentCaptured({ now }));
    const captured = inbox().consume('orders.payment-captured.v1', capture(orderId), capturing.handler);
    await capturing.reached; // PAID is written (one statement) and the row locked; nothing is committed yet
    const cancelled = post(`/orders/${orderId}/cancel`, {});
    await finishedOrWaiting(db, cancelled);
    capturing.release();
    await captured;
    expect((await cancelled).status).toBe(200);
    // The cancel came second and saw PAID: it cancelled the paid order and announced it, so the payment is refunded.
    const order = await orderOf(await get(`/orders/${orderId}`));
    expect(order.history.map((h) => h.status)).toEqual(['PENDING', 'PAID', 'CANCELLED']);
    expect(await cancellationsOf(orderId)).toHaveLength(1);
  });

  it.each(['consume', 'consumeInOneStatement'] as const)(
    'serialises them the other way round (%s): a cancel held after its write, the capture waiting on the row sees CANCELLED and asks for the refund',
    async (route) => {
      const { orderId } = await orderOf(await post('/orders', validOrder()));
      const { customerId } = await db.order.findUniqueOrThrow({ where: { id: orderId } });
      // The cancel's transaction, held after its first statement: the one-statement move has
      // written CANCELLED and holds the row; its announcement and its commit have not run.
      const cancelling = heldTransactions(db);
      const cancelled = cancelOrder(cancelling.handler, {
        orderId,
        reason: 'changed my mind',
        owner: customerId,
        correlationId: randomUUID(),
        now,
      });
      await cancelling.reached;
      const late = capture(orderId);
      const captured =
        route === 'consume'
          ? consumeCapture(late)
          : inbox().consumeInOneStatement('orders.payment-captured.v1', late, handlePaymentCaptured({ now }));
      await finishedOrWaiting(db, captured); // the capture's one-statement move waits on the row
      cancelling.release();
      expect(await cancelled).toMatchObject({ kind: 'cancelled' });
      expect(await captured).toEqual({ outcome: 'processed' });
      // The capture came second: its write found the order no longer payable, moved nothing, and
      // the plain way refused it and announced the cancellation again, so payments refunds it.
      const order = await orderOf(await get(`/orders/${orderId}`));
      expect(order.history.map((h) => h.status)).toEqual(['PENDING', 'CANCELLED']);
      expect(await db.refusedCapture.findMany({ where: { orderId } })).toEqual([
        expect.objectContaining({ refusal: 'not_payable', orderStatus: 'CANCELLED' }),
      ]);
      const [first, again] = await cancellationsOf(orderId);
      expect(first).toMatchObject({ causationId: null });
      expect(again).toMatchObject({ aggregateVersion: first!.aggregateVersion, causationId: late.messageId });
    },
  );

  it('cancels an order whose reservation expired, says why, and announces it so its payment stops', async () => {
    const { orderId } = await orderOf(await post('/orders', validOrder()));
    await inbox().consume('orders.stock-reserved.v1', reserved(orderId), handleStockReserved({ now }));
    const expired = testMessage('inventory.reservation-expired.v1', {
      aggregateId: orderId,
      aggregateVersion: 2,
      body: { orderId },
    });
    const handler = handleReservationExpired({ now });
    expect(await inbox().consume('orders.reservation-expired.v1', expired, handler)).toEqual({ outcome: 'processed' });
    const order = await orderOf(await get(`/orders/${orderId}`));
    expect(order).toMatchObject({ status: 'CANCELLED' });
    expect(order.history.at(-1)).toMatchObject({ reason: expect.stringContaining('did not complete in time') });
    expect(await cancellationsOf(orderId)).toEqual([expect.objectContaining({ causationId: expired.messageId })]);
  });

  it("fails an order with the provider's reason, for its customer to read", async () => {
    const { orderId } = await orderOf(await post('/orders', validOrder()));
    const failed = testMessage('payments.payment-failed.v1', {
      aggregateId: orderId,
      body: { orderId, code: 'resource_missing', reason: "No such PaymentMethod: 'pm_card_unknown'" },
    });
    await inbox().consume('orders.payment-failed.v1', failed, handlePaymentFailed({ now }));
    const order = await orderOf(await get(`/orders/${orderId}`));
    expect(order.status).toBe('PAYMENT_FAILED');
    expect(order.history.at(-1)).toMatchObject({ reason: "No such PaymentMethod: 'pm_card_unknown'" });
  });

  it('refuses an event about an order it never had, permanently', async () => {
    const outcome = await inbox().consume(
      'orders.stock-reserved.v1',
      reserved(randomUUID()),
      handleStockReserved({ now }),
    );
    expect(outcome).toMatchObject({ outcome: 'permanent_failure', code: 'unknown_order' });
  });
});

describe('the one-statement moves', () => {
  const at = new Date('2026-12-02T12:00:00.000Z');
  /** Two orders alike but for their ids, in `status`: one for the fast way, one for the plain. */
  const twins = async (status: OrderStatus) =>
    db.$transaction(async (tx) => {
      const order = {
        customerId: 'ada',
        customerEmail: 'ada@example.com',
        paymentMethod: 'pm_card_visa',
        currency: 'eur',
        lines: [{ sku: 'keyboard', quantity: 2, unitPriceCents: 4999 }],
        totalCents: 9998,
      };
      const ids = [(await createOrder(tx, order, at)).orderId, (await createOrder(tx, order, at)).orderId] as const;
      await tx.$executeRaw`UPDATE orders SET status = ${status}, version = 3 WHERE id = ANY(${[...ids]}::uuid[])`;
      return ids;
    });
  /** What the order's rows say, its id (and the capture's, when given) taken out. */
  const rowsOf = async (orderId: string, captureId = orderId) => {
    const same = (text: string) => text.replaceAll(orderId, '<order>').replaceAll(captureId, '<capture>');
    const [order] = await db.$queryRaw<unknown[]>`
      SELECT status, version, total_cents, currency, updated_at FROM orders WHERE id = ${orderId}::uuid`;
    const history = await db.$queryRaw<unknown[]>`
      SELECT version, status, causation_id::text, reason, occurred_at FROM order_status_changes
       WHERE order_id = ${orderId}::uuid ORDER BY version`;
    const refused = await db.$queryRaw<unknown[]>`
      SELECT amount_cents, currency, refusal, order_status FROM refused_captures WHERE order_id = ${orderId}::uuid`;
    const announced = await db.$queryRaw<{ type: string; body: unknown }[]>`
      SELECT type, envelope->'body' AS body FROM outbox_messages WHERE envelope->'body'->>'orderId' = ${orderId}`;
    return same(JSON.stringify({ order, history, refused, announced }));
  };
  const same = (result: unknown, orderId: string) => JSON.stringify(result).replaceAll(orderId, '<order>');

  it('gives the outcomes and rows of the plain way, from every status, for every trigger, owner or not', async () => {
    const causationId = randomUUID();
    for (const status of ORDER_STATUSES)
      for (const trigger of ORDER_TRIGGERS)
        for (const owner of [undefined, 'ada', 'someone-else']) {
          const [fast, plain] = await twins(status);
          const change = { now: at, causationId, reason: 'why', ...(owner ? { owner } : {}) };
          const fastResult = await db.$transaction((tx) => applyTransition(tx, fast, trigger, change));
          const plainResult = await db.$transaction((tx) => decideAndMove(tx, plain, trigger, change));
          const what = `${trigger} from ${status}, owner ${owner}`;
          expect(same(fastResult, fast), what).toBe(same(plainResult, plain));
          expect(await rowsOf(fast), what).toBe(await rowsOf(plain));
        }
    const unknown = randomUUID();
    const change = { now: at, causationId };
    expect(await db.$transaction((tx) => applyTransition(tx, unknown, 'cancel', change))).toEqual({
      kind: 'unknown_order',
    });
  });

  it('takes a capture as the plain way does, from every status, its total or not', async () => {
    for (const status of ORDER_STATUSES)
      for (const [amountCents, currency] of [
        [9998, 'eur'],
        [9997, 'eur'],
        [9998, 'usd'],
      ] as const) {
        const [fast, plain] = await twins(status);
        const captureOf = (orderId: string) =>
          testMessage('payments.payment-captured.v1', {
            aggregateId: orderId,
            aggregateVersion: 2,
            body: { orderId, paymentIntentId: 'pi_1', amountCents, currency },
          });
        const [fastCapture, plainCapture] = [captureOf(fast), captureOf(plain)];
        const fastResult = await db.$transaction((tx) => takeCapture(tx, fastCapture, at));
        const plainResult = await db.$transaction((tx) => decideCapture(tx, plainCapture, at));
        const what = `${amountCents} ${currency} from ${status}`;
        expect(same(fastResult, fast), what).toBe(same(plainResult, plain));
        expect(await rowsOf(fast, fastCapture.messageId), what).toBe(await rowsOf(plain, plainCapture.messageId));
      }
  });

  it('ends a delivery in one statement as consume ends it, from every status: stock reserved, a capture of the total or not', async () => {
    const recorded = async (consumer: string, messageId: string) =>
      (await db.processedMessage.count({ where: { consumer, messageId } })) === 1;
    const deliveries = [
      ['orders.stock-reserved.v1', handleStockReserved({ now: () => at }), (orderId: string) => reserved(orderId)],
      ...[9998, 9997].map(
        (amountCents) =>
          [
            'orders.payment-captured.v1',
            handlePaymentCaptured({ now: () => at }),
            (orderId: string) =>
              testMessage('payments.payment-captured.v1', {
                aggregateId: orderId,
                aggregateVersion: 2,
                body: { orderId, paymentIntentId: 'pi_1', amountCents, currency: 'eur' },
              }),
          ] as const,
      ),
    ] as const;
    for (const status of ORDER_STATUSES)
      for (const [consumer, handler, messageOf] of deliveries) {
        const [fast, plain] = await twins(status);
        const [fastMessage, plainMessage] = [messageOf(fast), messageOf(plain)];
        const fastOutcome = await inbox().consumeInOneStatement(consumer, fastMessage as never, handler as never);
        const plainOutcome = await inbox().consume(consumer, plainMessage as never, handler as never);
        const what = `${consumer} ${JSON.stringify(fastMessage.body)} from ${status}`;
        expect(same(fastOutcome, fast), what).toBe(same(plainOutcome, plain));
        expect(await rowsOf(fast, fastMessage.messageId), what).toBe(await rowsOf(plain, plainMessage.messageId));
        expect(await recorded(consumer, fastMessage.messageId), what).toBe(
          await recorded(consumer, plainMessage.messageId),
        );
      }
  });
});

describe('placing an order in one statement', () => {
  const at = new Date('2026-12-02T12:00:00.000Z');
  const DAY = 86_400_000;
  /** The catalog as a process that read all of it would know it. */
  const asRead = (changes: Record<string, number> = {}): CatalogAsLastRead =>
    new Map(
      [
        ...CATALOG,
        { sku: 'retired', unitPriceCents: 500, currency: 'eur' },
        { sku: 'franc', unitPriceCents: 700, currency: 'chf' },
      ].map(({ sku, unitPriceCents, currency }) => [
        sku,
        { sku, unitPriceCents: changes[sku] ?? unitPriceCents, currency, withdrawn: sku === 'retired' },
      ]),
    );
  beforeAll(async () => {
    for (const [sku, unitPriceCents, currency, withdrawn] of [
      ['retired', 500, 'eur', true],
      ['franc', 700, 'chf', false],
    ] as const) {
      const item = { name: sku, unitPriceCents, currency, withdrawn, updatedAt: at };
      await db.catalogItem.upsert({ where: { sku }, create: { sku, ...item }, update: item });
    }
  });
  const placing = (
    customerId: string,
    lines: { sku: string; quantity: number }[],
    { key, when = at, catalog = asRead() }: { key?: string; when?: Date; catalog?: CatalogAsLastRead } = {},
  ) => ({
    order: { customerId, customerEmail: `${customerId}@example.com`, paymentMethod: 'pm_card_visa', lines },
    correlationId: '7b1f3f2e-4e8f-4a8e-9d8e-2f1f3f2e4e8f',
    idempotency: key === undefined ? undefined : { key, request: { lines } },
    now: () => when,
    keyRetentionMs: DAY,
    catalog,
  });
  /** What a customer's rows say, their name and their orders' ids taken out. */
  const rowsOf = async (customerId: string) => {
    const orders = await db.$queryRaw<{ id: string }[]>`
      SELECT id::text, customer_email, currency, payment_method, status, version, total_cents, created_at, updated_at
        FROM orders WHERE customer_id = ${customerId} ORDER BY created_at, total_cents`;
    const ids = orders.map((order) => order.id);
    const lines = await db.$queryRaw<unknown[]>`
      SELECT line_no, sku, quantity, unit_price_cents FROM order_lines WHERE order_id = ANY(${ids}::uuid[])
       ORDER BY array_position(${ids}::uuid[], order_id), line_no`;
    const history = await db.$queryRaw<unknown[]>`
      SELECT version, status, causation_id, occurred_at FROM order_status_changes WHERE order_id = ANY(${ids}::uuid[])
       ORDER BY array_position(${ids}::uuid[], order_id), version`;
    const announced = await db.$queryRaw<unknown[]>`
      SELECT type, envelope - 'messageId' AS envelope FROM outbox_messages
       WHERE envelope->>'aggregateId' = ANY(${ids}) ORDER BY created_at`;
    const keys = await db.$queryRaw<unknown[]>`
      SELECT key, request_hash, result, created_at, expires_at FROM idempotency_keys WHERE customer_id = ${customerId} ORDER BY key`;
    return anonymous(JSON.stringify({ orders, lines, history, announced, keys }), customerId, ids);
  };
  const anonymous = (text: string, customerId: string, ids: readonly string[]) =>
    ids.reduce((t, id, i) => t.replaceAll(id, `<order ${i}>`), text).replaceAll(customerId, '<customer>');

  it('places an order as the plain way does: new, repeated, reused, refused, at a changed price, past an expired key', async () => {
    const two = [
      { sku: 'keyboard', quantity: 2 },
      { sku: 'mouse', quantity: 1 },
      { sku: 'keyboard', quantity: 1 },
    ];
    const other = [{ sku: 'cable', quantity: 3 }];
    const scenarios: [string, ((customer: string) => ReturnType<typeof placing>)[]][] = [
      ['no key', [(c) => placing(c, two)]],
      [
        'a key, its repeat, the key with another body',
        [
          (c) => placing(c, two, { key: 'k' }),
          (c) => placing(c, two, { key: 'k' }),
          (c) => placing(c, other, { key: 'k' }),
        ],
      ],
      ['an unknown SKU', [(c) => placing(c, [{ sku: 'nothing', quantity: 1 }], { key: 'k' })]],
      ['a withdrawn SKU', [(c) => placing(c, [{ sku: 'retired', quantity: 1 }])]],
      ['two currencies', [(c) => placing(c, [...other, { sku: 'franc', quantity: 1 }], { key: 'k' })]],
      ['past the largest total', [(c) => placing(c, [{ sku: 'monitor', quantity: 6000 }])]],
      ['a price changed since it was read', [(c) => placing(c, two, { key: 'k', catalog: asRead({ keyboard: 1 }) })]],
      ['a SKU not read yet', [(c) => placing(c, two, { catalog: new Map() })]],
      [
        'a key past its retention, used again with another body',
        [
          (c) => placing(c, two, { key: 'k' }),
          (c) => placing(c, other, { key: 'k', when: new Date(at.getTime() + 2 * DAY) }),
        ],
      ],
    ];
    for (const [what, requests] of scenarios) {
      const [fast, plain] = [`fast-${randomUUID()}`, `plain-${randomUUID()}`];
      for (const request of requests) {
        const fastResult = await placeOrder(db, request(fast));
        const plainResult = await placeThePlainWay(db, request(plain));
        const ids = async (customer: string) =>
          (
            await db.order.findMany({
              where: { customerId: customer },
              orderBy: [{ createdAt: 'asc' }, { totalCents: 'asc' }],
            })
          ).map((order) => order.id);
        expect(anonymous(JSON.stringify(fastResult), fast, await ids(fast)), what).toBe(
          anonymous(JSON.stringify(plainResult), plain, await ids(plain)),
        );
      }
      expect(await rowsOf(fast), what).toBe(await rowsOf(plain));
    }
  });

  it('writes only the common case, and writes nothing for the rest: the plain way decides those', async () => {
    const lines = [{ sku: 'keyboard', quantity: 2 }];
    const placed = await placeInOneStatement(db, placing('ada', lines, { key: 'k' }));
    expect(placed).toMatchObject({ status: 'PENDING', totalCents: 9998 });
    expect(await db.order.count()).toBe(1);
    expect(await db.outboxMessage.count()).toBe(1);
    expect(await db.idempotencyKey.findMany()).toMatchObject([{ key: 'k', result: placed }]);
    for (const [what, request] of [
      ['the key again', placing('ada', lines, { key: 'k' })],
      ['a price changed since it was read', placing('ada', lines, { catalog: asRead({ keyboard: 1 }) })],
      ['a SKU not read yet', placing('ada', lines, { catalog: new Map() })],
      [
        'a SKU withdrawn since it was read',
        placing('ada', [{ sku: 'retired', quantity: 1 }], {
          catalog: new Map([['retired', { sku: 'retired', unitPriceCents: 500, currency: 'eur', withdrawn: false }]]),
        }),
      ],
    ] as const) {
      expect(await placeInOneStatement(db, request), what).toBeUndefined();
    }
    expect(await db.order.count()).toBe(1);
    expect(await db.outboxMessage.count()).toBe(1);
  });

  it('serialises on the key with the plain way: a first request held between its key read and its write, the repeat answers key_in_flight, then replays', async () => {
    const lines = [{ sku: 'keyboard', quantity: 1 }];
    const request = placing('ada', lines, { key: 'held' });
    let reached!: () => void;
    const isHeld = new Promise<void>((resolve) => (reached = resolve));
    let release!: () => void;
    const releasing = new Promise<void>((resolve) => (release = resolve));
    // The plain way's first request: the key locked and read (no record), held before its writes.
    const first = idempotent(
      db,
      { customerId: 'ada', key: 'held', request: request.idempotency!.request, now: at, retentionMs: DAY },
      async (tx) => {
        reached();
        await releasing;
        return createOrder(
          tx,
          {
            ...request.order,
            currency: 'eur',
            totalCents: 4999,
            lines: [{ sku: 'keyboard', quantity: 1, unitPriceCents: 4999 }],
          },
          at,
        );
      },
    );
    await isHeld;
    expect(await placeInOneStatement(db, request)).toBeUndefined();
    expect(await placeOrder(db, request)).toEqual({ kind: 'key_in_flight' });
    release();
    const done = await first;
    expect(await placeOrder(db, request)).toEqual({
      kind: 'placed',
      order: (done as { result: unknown }).result,
      replayed: true,
    });
    expect(await db.order.count()).toBe(1);
    expect(await db.idempotencyKey.count()).toBe(1);
  });

  it('prices from its one catalog read: a price change committed while the plain way is held between its read and its write leaves that order at the price it read, lines, total and event alike; the next order pays the new price', async () => {
    const lamp = (unitPriceCents: number) => ({ name: 'Desk lamp', unitPriceCents, currency: 'eur', withdrawn: false });
    const lines = [{ sku: 'lamp', quantity: 2 }];
    const catalog: CatalogAsLastRead = new Map();
    await setCatalogItem(db, 'lamp', lamp(2500), at);
    try {
      // The order's transaction, held after its first statement: the catalog read.
      const held = heldTransactions(db);
      const first = placeThePlainWay(held.handler, placing('ada', lines, { catalog }));
      await held.reached;
      await setCatalogItem(db, 'lamp', lamp(3000), at); // the read took no lock: the change commits at once
      held.release();
      const atTheOldPrice = { currency: 'eur', totalCents: 5000, lines: [{ ...lines[0], unitPriceCents: 2500 }] };
      expect(await first).toMatchObject({ kind: 'placed', order: atTheOldPrice });
      const [event] = await db.outboxMessage.findMany();
      expect(event!.envelope).toMatchObject({ body: atTheOldPrice });
      expect(catalog.get('lamp')).toMatchObject({ unitPriceCents: 2500 });

      // What this process read is stale now: the one statement sees the catalog's price differ
      // and writes nothing; the plain way reads again and prices at the new one.
      expect(await placeInOneStatement(db, placing('bob', lines, { catalog }))).toBeUndefined();
      expect(await placeOrder(db, placing('bob', lines, { catalog }))).toMatchObject({
        kind: 'placed',
        order: { totalCents: 6000, lines: [{ unitPriceCents: 3000 }] },
      });
      expect(catalog.get('lamp')).toMatchObject({ unitPriceCents: 3000 });
    } finally {
      await db.catalogItem.delete({ where: { sku: 'lamp' } });
    }
  });
});
