import {
  asOperator,
  getJson,
  placeOrder,
  SERVICES,
  waitForStatus,
  runStories,
  type RunningSystem,
  type ServiceName,
} from '@idem/native-run';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { formatReport, listStripe } from '@idem/checker';
import { startOtlpReceiver, waitFor, type ReceivedSpan } from '@idem/testkit';
import { Redis } from 'ioredis';
import pg from 'pg';
import {
  checkSystem,
  placeTracedOrder,
  readRows,
  startIsolatedSystem,
  stripeOf,
  traceGapsOnceQuiet,
} from './support.js';

let system: RunningSystem;
let otlp: Awaited<ReturnType<typeof startOtlpReceiver>>;

beforeAll(async () => {
  otlp = await startOtlpReceiver();
  system = await startIsolatedSystem({
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.endpoint,
      OTEL_BSP_SCHEDULE_DELAY: '200',
      // As `pnpm start` hands the system each API's token, and as a shell may hold a named one.
      ...Object.fromEntries(SERVICES.map((s) => [`${s.toUpperCase()}_ADMIN_TOKEN`, randomUUID()])),
      ADMIN_TOKENS: `shell:${randomUUID()}`,
    },
  });
}, 180_000);
afterAll(async () => {
  await system?.stop();
  await otlp?.close();
}, 60_000);

describe('the whole system, as native processes', () => {
  it('tells the four demo stories: paid, rejected for stock, declined, refunded after cancel', async () => {
    const results = await runStories(system.urls, system.adminTokens);
    expect(results.map((r) => [r.story, r.status, r.ok])).toEqual([
      ['paid', 'PAID', true],
      ['rejected for stock', 'REJECTED', true],
      ['card declined', 'PAYMENT_FAILED', true],
      ['cancelled after payment', 'REFUNDED', true],
    ]);
    // The declined and the refunded orders gave their stock back; the refund happened once.
    for (const sku of ['mouse', 'monitor']) {
      expect(await getJson(`${system.urls.inventory}/stock/${sku}`)).toEqual({ sku, available: 1000, reserved: 0 });
    }
    const refunded = results.find((r) => r.story === 'cancelled after payment')!;
    const intents = await stripe<{ id: string; metadata: { order_id: string } }>('/v1/payment_intents');
    const [intent] = intents.filter((p) => p.metadata.order_id === refunded.orderId);
    expect(await stripe(`/v1/refunds?payment_intent=${intent!.id}`)).toHaveLength(1);
  }, 120_000);

  it("fails an order whose payment method the provider does not know, with the provider's words, and frees its stock", async () => {
    const stock = () => getJson<{ available: number; reserved: number }>(`${system.urls.inventory}/stock/keyboard`);
    const before = await stock();
    const order = await placeOrder(system.urls, [{ sku: 'keyboard', quantity: 5 }], 'pm_no_such_method');
    const failed = (await waitForStatus(system.urls, order.orderId, new Set(['PAYMENT_FAILED']))) as typeof order & {
      history: { status: string; reason?: string }[];
    };
    expect(failed.status).toBe('PAYMENT_FAILED');
    expect(failed.history.at(-1)).toMatchObject({ reason: "No such PaymentMethod: 'pm_no_such_method'" });
    await waitFor(async () => JSON.stringify(await stock()) === JSON.stringify(before), {
      what: 'the 5 keyboards back on sale',
    });
  }, 60_000);

  it('drives 50 orders through to PAID, each with exactly one receipt', async () => {
    const orders = await Promise.all(
      Array.from({ length: 50 }, () => placeOrder(system.urls, [{ sku: 'cable', quantity: 1 }])),
    );
    const ended = await Promise.all(
      orders.map((o) => waitForStatus(system.urls, o.orderId, new Set(['PAID']), 90_000)),
    );
    expect(ended.map((o) => o.status)).toEqual(orders.map(() => 'PAID'));

    for (const order of orders) {
      let emails: { kind: string; status: string }[] = [];
      const deadline = Date.now() + 90_000;
      do {
        emails = (
          await getJson<{ emails: typeof emails }>(
            `${system.urls.notifications}/emails?orderId=${order.orderId}`,
            asOperator(system.adminTokens.notifications),
          )
        ).emails;
      } while (
        !emails.some((e) => e.kind === 'receipt' && e.status === 'sent') &&
        Date.now() < deadline &&
        (await sleep(200))
      );
      expect(emails.filter((e) => e.kind === 'receipt')).toEqual([expect.objectContaining({ status: 'sent' })]);
    }
    const mail = await getJson<{ messages: { Subject: string; Snippet: string }[] }>(
      `${system.urls.mail}/api/v1/messages?limit=1000`,
    );
    for (const order of orders) {
      const receipts = mail.messages.filter(
        (m) => m.Subject.startsWith('Receipt') && m.Snippet.includes(order.orderId),
      );
      expect(receipts).toHaveLength(1);
    }
    const intents = await stripe<{ id: string; metadata: { order_id: string } }>('/v1/payment_intents');
    const perOrder = new Map<string, number>();
    for (const intent of intents)
      perOrder.set(intent.metadata.order_id, (perOrder.get(intent.metadata.order_id) ?? 0) + 1);
    for (const order of orders) expect(perOrder.get(order.orderId)).toBe(1);
  }, 300_000);
});

describe('the native run', () => {
  it('listens on loopback only: no process of the system serves the network', () => {
    const pids = new Set([...system.processes.values()].map((child) => child.pid));
    const listening = execFileSync('ss', ['-ltnpH'], { encoding: 'utf8' })
      .split('\n')
      .filter((line) => [...line.matchAll(/pid=(\d+)/g)].some(([, pid]) => pids.has(Number(pid))))
      .map((line) => line.split(/\s+/)[3]!);
    expect(listening.length).toBeGreaterThanOrEqual(pids.size); // every process listens somewhere
    expect(listening.filter((address) => !/^(127\.0\.0\.1|\[::1\]):\d+$/.test(address))).toEqual([]);
  });

  it("gives each API only its own operator token, and no process another's or the shell's ADMIN_TOKENS", () => {
    for (const [name, child] of system.processes) {
      const environ = readFileSync(`/proc/${child.pid}/environ`, 'utf8').split('\0');
      expect(
        environ.filter((v) => /^(ADMIN_TOKENS|[A-Z]+_ADMIN_TOKEN)=/.test(v)),
        name,
      ).toEqual([]);
      const service = SERVICES.find((s) => s === name);
      if (service) expect(environ, name).toContain(`ADMIN_TOKEN=${system.adminTokens[service]}`);
    }
  });
});

describe('database roles', () => {
  it('each service connects as its runtime role, which may change its data and not its schema', async () => {
    for (const service of SERVICES) {
      const sessions = await readRows<{ role: string }>(
        system.databaseUrls[service],
        `SELECT DISTINCT usename AS role FROM pg_stat_activity
          WHERE datname = current_database() AND backend_type = 'client backend' AND usename <> current_user`,
      );
      expect(sessions, service).toEqual([{ role: `${service}_runtime` }]);
    }
    const runtime = new URL(system.databaseUrls.orders);
    runtime.username = 'orders_runtime';
    const client = new pg.Client({ connectionString: runtime.toString() });
    await client.connect();
    try {
      await expect(client.query('ALTER TABLE orders ADD COLUMN discount int')).rejects.toMatchObject({ code: '42501' });
    } finally {
      await client.end();
    }
  });
});

describe('Redis users', () => {
  it('each service reaches Redis as a user of its own, whose rules admit only its queues', async () => {
    const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
    try {
      const clients = String(await redis.call('CLIENT', 'LIST'));
      const users = new Set([...clients.matchAll(/ user=(\S+)/g)].map((match) => match[1]!));
      for (const service of SERVICES) expect(users, service).toContain(`${system.queuePrefix}-${service}`);
      const rules = String(await redis.call('ACL', 'GETUSER', `${system.queuePrefix}-inventory`).then(JSON.stringify));
      expect(rules).toContain(`${system.queuePrefix}:inventory.order-placed.v1:*`);
      expect(rules).not.toContain(`${system.queuePrefix}:orders.payment-captured.v1:*`);
    } finally {
      redis.disconnect();
    }
  });
});

describe('what an order costs: the catalog decides, the order keeps it', () => {
  type Intent = { id: string; amount: number; currency: string; metadata: { order_id: string } };
  /** As the operator of one API (orders unless told otherwise), with that API's own token. */
  const operator = (service: ServiceName = 'orders') => asOperator(system.adminTokens[service]);
  const put = (service: ServiceName, url: string, body: unknown) =>
    fetch(url, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', ...operator(service) },
      body: JSON.stringify(body),
    });

  it("charges every order of the run its lines' catalog price × quantity", async () => {
    const { items } = await getJson<{ items: { sku: string; unitPriceCents: number; currency: string }[] }>(
      `${system.urls.orders}/catalog`,
    );
    const price = new Map(items.map((i) => [i.sku, i]));
    const { orders } = await getJson<{ orders: { orderId: string; lines: { sku: string; quantity: number }[] }[] }>(
      `${system.urls.orders}/orders?limit=100`,
      operator(),
    );
    const intents = await stripe<Intent>('/v1/payment_intents');
    const charged = intents.filter((i) => orders.some((o) => o.orderId === i.metadata.order_id));
    expect(charged.length).toBeGreaterThanOrEqual(53); // the stories' three charges and the 50 orders
    for (const intent of charged) {
      const order = orders.find((o) => o.orderId === intent.metadata.order_id)!;
      const expected = order.lines.reduce((sum, l) => sum + l.quantity * price.get(l.sku)!.unitPriceCents, 0);
      expect({ order: order.orderId, amount: intent.amount, currency: intent.currency }).toEqual({
        order: order.orderId,
        amount: expected,
        currency: price.get(order.lines[0]!.sku)!.currency,
      });
    }
  }, 60_000);

  it('charges and refunds the price an order was placed at, whatever the catalog says by then', async () => {
    expect(
      (
        await put('orders', `${system.urls.orders}/catalog/lamp`, {
          name: 'Desk lamp',
          unitPriceCents: 2500,
          currency: 'eur',
        })
      ).status,
    ).toBe(200);
    expect((await put('inventory', `${system.urls.inventory}/stock/lamp`, { available: 10 })).status).toBe(200);
    const order = await placeOrder(system.urls, [{ sku: 'lamp', quantity: 2 }]);
    // The operator changes the price before the order is paid.
    expect(
      (
        await put('orders', `${system.urls.orders}/catalog/lamp`, {
          name: 'Desk lamp',
          unitPriceCents: 1,
          currency: 'eur',
        })
      ).status,
    ).toBe(200);
    await waitForStatus(system.urls, order.orderId, new Set(['PAID']));
    const [intent] = (await stripe<Intent>('/v1/payment_intents')).filter((i) => i.metadata.order_id === order.orderId);
    expect(intent).toMatchObject({ amount: 5000, currency: 'eur' });

    const cancel = await fetch(`${system.urls.orders}/orders/${order.orderId}/cancel`, {
      method: 'POST',
      headers: operator(),
    });
    expect(cancel.status).toBe(200);
    const refunded = await waitForStatus(system.urls, order.orderId, new Set(['REFUNDED']));
    expect(refunded).toMatchObject({ totalCents: 5000, lines: [{ sku: 'lamp', quantity: 2, unitPriceCents: 2500 }] });
    expect(await stripe<{ id: string; amount: number }>(`/v1/refunds?payment_intent=${intent!.id}`)).toEqual([
      expect.objectContaining({ amount: 5000 }),
    ]);
  }, 90_000);
});

describe('the exactly-once checker', () => {
  const check = () => checkSystem(system);

  it('finds nothing lost, doubled or stuck after the flows above', async () => {
    // The checker counts only what was published more than its quiet window ago: wait until
    // that covers the orders above too, not just the stories.
    const orderPlaced = (report: Awaited<ReturnType<typeof check>>) =>
      report.coverage.find((c) => c.consumer === 'inventory.order-placed.v1')!.processed;
    const report = await waitFor(
      async () => {
        const current = await check();
        return current.ok && orderPlaced(current) >= 54 /* the four stories and the 50 orders */ && current;
      },
      { timeoutMs: 60_000, what: 'a clean checker report covering every order' },
    );
    expect(report.findings).toEqual([]);
    expect(formatReport(report)).toContain('verdict: OK');
  }, 90_000);

  it('reports a lost message, a doubled transition, a mischarge and a cancelled order charged, and fails', async () => {
    const orders = new pg.Client({ connectionString: system.databaseUrls.orders });
    await orders.connect();
    try {
      const ghost = randomUUID();
      const envelope = { messageId: ghost, type: 'orders.order-placed.v1' };
      await orders.query(
        `INSERT INTO outbox_messages (message_id, type, envelope, created_at, published_at, next_attempt_at)
         VALUES ($1, 'orders.order-placed.v1', $2, now() - interval '10 minutes', now() - interval '10 minutes', now())`,
        [ghost, JSON.stringify(envelope)],
      );
      const { rows } = await orders.query<{ order_id: string; version: number; causation_id: string }>(
        `SELECT order_id, version, causation_id FROM order_status_changes WHERE causation_id IS NOT NULL LIMIT 1`,
      );
      await orders.query(`INSERT INTO order_status_changes VALUES ($1, $2, 'PAID', $3, now())`, [
        rows[0]!.order_id,
        99,
        rows[0]!.causation_id,
      ]);
      // An order whose charge is not its total (as a client-set price would make it).
      const { rows: paid } = await orders.query<{ id: string }>(`SELECT id FROM orders WHERE status = 'PAID' LIMIT 1`);
      await orders.query(`UPDATE orders SET total_cents = total_cents + 1 WHERE id = $1`, [paid[0]!.id]);
      // A paid order cancelled without its refund (what a cancel racing the payment did before the fix).
      const { rows: kept } = await orders.query<{ id: string }>(
        `UPDATE orders SET status = 'CANCELLED', updated_at = now() - interval '10 minutes'
          WHERE id = (SELECT id FROM orders WHERE status = 'PAID' AND id <> $1 LIMIT 1) RETURNING id`,
        [paid[0]!.id],
      );

      const report = await check();
      expect(report.ok).toBe(false);
      expect(report.findings).toEqual(
        expect.arrayContaining([
          expect.objectContaining({
            check: 'lost',
            subject: 'inventory.order-placed.v1 (orders.order-placed.v1)',
            examples: [ghost],
          }),
          expect.objectContaining({
            check: 'lost',
            subject: 'notifications.order-placed.v1 (orders.order-placed.v1)',
            examples: [ghost],
          }),
          expect.objectContaining({ check: 'mischarged', examples: [expect.stringContaining(paid[0]!.id)] }),
          expect.objectContaining({
            check: 'cancelled_but_charged',
            examples: [expect.stringContaining(`${kept[0]!.id}: CANCELLED, kept`)],
          }),
          expect.objectContaining({
            check: 'duplicated',
            subject: 'order status transitions per causing message',
            examples: [rows[0]!.causation_id],
          }),
        ]),
      );
      expect(formatReport(report)).toContain('verdict: VIOLATIONS FOUND');
    } finally {
      await orders.end();
    }
  }, 60_000);
});

describe('traces exported over OTLP', () => {
  it('follow an order from the HTTP request through the outbox to each consumer, whose spans link to the publication', async () => {
    const order = await placeOrder(system.urls, [{ sku: 'keyboard', quantity: 1 }]);
    await waitForStatus(system.urls, order.orderId, new Set(['PAID']));
    const sendOf = (messageSpan: ReceivedSpan) =>
      otlp.spans.find((s) => s.name.startsWith('send ') && messageSpan.links.some((l) => l.spanId === s.spanId));
    const processed = await waitFor(() =>
      otlp.spans.find(
        (s) =>
          s.name === 'process inventory.order-placed.v1' && s.attributes['idem.outcome'] === 'processed' && sendOf(s),
      ),
    );
    const send = sendOf(processed)!;
    expect(send).toMatchObject({ service: 'orders', name: 'send orders.order-placed.v1' });
    expect(processed).toMatchObject({
      service: 'inventory',
      attributes: expect.objectContaining({
        'messaging.destination.name': 'inventory.order-placed.v1',
        'messaging.system': 'bullmq',
      }),
    });
    // The publication's trace began with the HTTP request that placed the order (auto-instrumented).
    expect(otlp.spans.some((s) => s.traceId === send.traceId && s.service === 'orders' && s.kind === 2)).toBe(true);
    // The inbox transaction's SQL is traced inside the consumer span (auto-instrumented pg).
    await waitFor(() => otlp.spans.some((s) => s.parentSpanId === processed.spanId && s.service === 'inventory'));
  }, 60_000);

  it("follow the money: one order's trace graph reaches its request, every delivery, the provider call and both e-mails", async () => {
    const { orderId, traceId } = await placeTracedOrder(system.urls.orders);
    expect((await waitForStatus(system.urls, orderId, new Set(['PAID']))).status).toBe('PAID');
    expect(await traceGapsOnceQuiet(() => otlp.spans, traceId, orderId)).toEqual([]);
  }, 60_000);

  it('carry no customer data: no e-mail address, token or card reference in any attribute of any span', async () => {
    // The runs above put addresses, tokens and payment methods into requests, jobs and rows.
    const redisSpans = otlp.spans.filter((s) => s.attributes['db.system.name'] === 'redis');
    expect(redisSpans.length).toBeGreaterThan(0);
    const leaks = otlp.spans.flatMap((span) =>
      Object.entries(span.attributes)
        .filter(([, value]) => /@example\.com|eyJhbGci|pm_card_/.test(String(value)))
        .map(([key, value]) => `${span.service} ${span.name} ${key}=${String(value).slice(0, 120)}`),
    );
    expect(leaks).toEqual([]);
  }, 30_000);
});

/** Reads the Stripe simulator's state, as an operator would read the provider's dashboard. */
const stripe = <T extends { id: string }>(path: string) => listStripe<T>(stripeOf(system), path);

const sleep = (ms: number) => new Promise<true>((resolve) => setTimeout(() => resolve(true), ms));
