import { randomUUID } from 'node:crypto';
import { createServer, request, type Server } from 'node:http';
import { fileURLToPath } from 'node:url';
import { SERVICE_NAMES, type ServiceName } from '@idem/shop';
import { faultsFromEnv } from '@idem/faults';
import { createHttpApp, DEFAULT_TOKEN_CLAIMS, listen, mintCustomerToken, type RunningServer } from '@idem/http';
import { journalKey } from '@idem/messaging';
import type { RunningService } from '@idem/runtime';
import { createMigratedDatabase, redisUrl, uniqueName } from '@idem/testkit';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SERVICE_CONFIGS } from '../../repository/service-configs.js';
import { createConsole, FORM_POST, type ConsoleOptions } from './console.js';

/** A service process started without IDEM_FAULTS_ENABLED=1: it has no /faults at all. */
let plain: RunningServer;
let databases: Awaited<ReturnType<typeof createMigratedDatabase>>[];
let databaseUrls: Record<ServiceName, string>;
const prefix = uniqueName('idem_console_test');
beforeAll(async () => {
  plain = await listen(createHttpApp({ health: {}, routes: () => {} }), 0);
  databases = await Promise.all(
    SERVICE_NAMES.map((service) =>
      createMigratedDatabase(
        `console_${service}`,
        fileURLToPath(new URL(`../../../services/${service}/prisma/migrations`, import.meta.url)),
        SERVICE_CONFIGS[service].tables,
      ),
    ),
  );
  databaseUrls = Object.fromEntries(SERVICE_NAMES.map((s, i) => [s, databases[i]!.url])) as Record<ServiceName, string>;
});
afterAll(async () => {
  await plain.close();
  await Promise.all(databases.map((d) => d.drop()));
  const redis = new Redis(redisUrl);
  await redis.del(...SERVICE_NAMES.map((service) => journalKey(prefix, service)));
  redis.disconnect();
});

/** A console on a free port; `use` gets its base URL, and the console is closed after. */
async function withConsole(
  options: Partial<ConsoleOptions>,
  use: (base: string, port: number) => Promise<void>,
): Promise<void> {
  const console_ = createConsole({
    databaseUrls,
    redisUrl,
    queuePrefix: prefix,
    ordersApi: 'http://127.0.0.1:1',
    stripe: { apiBase: 'http://127.0.0.1:1', apiKey: 'sk_test_idem_simulator' },
    processes: { orders: `http://127.0.0.1:${plain.port}` },
    ...options,
  });
  const server = await console_.listen(0);
  try {
    const { port } = server.address() as { port: number };
    await use(`http://127.0.0.1:${port}`, port);
  } finally {
    server.closeAllConnections();
    server.close();
    await console_.close();
  }
}

/** GET with a Host of our choosing (fetch does not let a caller set one). */
function getWithHost(port: number, path: string, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    request({ host: '127.0.0.1', port, path, headers: { host } }, (res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    })
      .on('error', reject)
      .end();
  });
}

const formTokenOf = (html: string) => /name="csrf" value="([^"]+)"/.exec(html)?.[1];

describe('the console’s fault switches page', () => {
  it('says so when a process was started without switches', async () => {
    await withConsole({ faultsTokens: { orders: 'orders-switches-token-0123' } }, async (base) => {
      const html = await (await fetch(`${base}/faults`)).text();
      expect(html).toContain('Switches are unavailable in orders');
      expect(html).toContain('started without IDEM_FAULTS_ENABLED=1');
      expect(html).not.toContain('switch on</button>');
    });
  });

  it('says so when the console has no fault switches token', async () => {
    await withConsole({ adminToken: 'console-test-admin-token-01' }, async (base) => {
      expect(await (await fetch(`${base}/faults`)).text()).toContain('The console has no fault switches token');
    });
  });

  it("sends each process only its service's switches token, never the operator token, reading and setting switches", async () => {
    const OPERATOR = 'console-test-admin-token-01';
    const tokens = { orders: 'orders-switches-token-0123', payments: 'payments-switches-token-0123' };
    // Two processes that record what they are sent, as code in a compromised worker would.
    const seen: { process: string; authorization: string | undefined }[] = [];
    const recorder = (process: string) =>
      createServer((req, res) => {
        seen.push({ process, authorization: req.headers.authorization });
        req.resume();
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ process, pid: 1, startedAt: '', switches: ['publish-twice'], rules: [] }));
      });
    const servers = { 'orders-2': recorder('orders-2'), payments: recorder('payments') };
    for (const server of Object.values(servers))
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = (server: Server) => `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    try {
      await withConsole(
        {
          adminToken: OPERATOR,
          faultsTokens: tokens,
          processes: { 'orders-2': url(servers['orders-2']), payments: url(servers.payments) },
        },
        async (base) => {
          const html = await (await fetch(`${base}/faults`)).text();
          const form = new URLSearchParams({ csrf: formTokenOf(html)!, name: 'publish-twice' });
          const post = await fetch(`${base}/faults/payments`, { method: 'POST', body: form, redirect: 'manual' });
          expect(post.status).toBe(303);
        },
      );
      expect(seen.length).toBeGreaterThanOrEqual(4); // two reads, the set's read and its write
      for (const { process, authorization } of seen) {
        expect(authorization).not.toContain(OPERATOR);
        expect(authorization).toBe(`Bearer ${process === 'payments' ? tokens.payments : tokens.orders}`);
      }
    } finally {
      for (const server of Object.values(servers)) server.close();
    }
  });
});

describe('the console refuses every page but its own', () => {
  it('answers only to its own names: a foreign Host (DNS rebinding) is refused, a configured one served', async () => {
    await withConsole({ allowedHosts: ['console.test:8080'] }, async (_base, port) => {
      expect((await getWithHost(port, '/faults', 'evil.example')).status).toBe(403);
      expect((await getWithHost(port, '/', `evil.example:${port}`)).status).toBe(403);
      expect((await getWithHost(port, '/faults', `localhost:${port}`)).status).toBe(200);
      expect((await getWithHost(port, '/faults', 'console.test:8080')).status).toBe(200);
      expect((await getWithHost(port, '/health', 'anything:1')).status).toBe(200); // a probe
    });
  });

  it('refuses a form post from another origin or site, or without its token, and takes its own', async () => {
    await withConsole({}, async (base) => {
      const home = await (await fetch(`${base}/`)).text();
      const token = formTokenOf(home);
      expect(token).toMatch(/^[\w-]{40,}$/);
      const post = (headers: Record<string, string>, body: Record<string, string>) =>
        fetch(`${base}/orders`, {
          method: 'POST',
          redirect: 'manual',
          headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
          body: new URLSearchParams(body).toString(),
        });
      expect((await post({ origin: 'http://evil.example' }, { scenario: 'nope', csrf: token! })).status).toBe(403);
      expect((await post({ 'sec-fetch-site': 'cross-site' }, { scenario: 'nope', csrf: token! })).status).toBe(403);
      expect((await post({ 'sec-fetch-site': 'same-site' }, { scenario: 'nope', csrf: token! })).status).toBe(403);
      expect((await post({ origin: base }, { scenario: 'nope' })).status).toBe(403);
      expect((await post({ origin: base }, { scenario: 'nope', csrf: 'guessed' })).status).toBe(403);
      // Its own form, with its token: past the guard (the scenario is then refused as unknown).
      expect(
        (await post({ origin: base, 'sec-fetch-site': 'same-origin' }, { scenario: 'nope', csrf: token! })).status,
      ).toBe(400);
    });
  });

  it('sends every page with a policy that runs nothing inline and forbids framing, and no inline script or style', async () => {
    await withConsole({}, async (base) => {
      for (const path of ['/', '/faults', '/lessons', '/assets/console.css', '/assets/live.js']) {
        const res = await fetch(`${base}${path}`);
        expect(res.status, path).toBe(200);
        const policy = res.headers.get('content-security-policy') ?? '';
        expect(policy, path).toContain("frame-ancestors 'none'");
        expect(policy, path).toContain("script-src 'self'");
        expect(policy, path).not.toContain('unsafe-inline');
        expect(res.headers.get('x-content-type-options'), path).toBe('nosniff');
        expect(res.headers.get('referrer-policy'), path).toBe('no-referrer');
        const body = await res.text();
        if (res.headers.get('content-type')?.startsWith('text/html')) {
          expect(body, path).not.toMatch(/<script>|<style>| style=| on\w+=/);
          for (const form of body.match(FORM_POST) ?? []) {
            expect(body.slice(body.indexOf(form) + form.length), path).toMatch(/^<input type="hidden" name="csrf"/);
          }
        }
      }
    });
  });
});

describe('the live view', () => {
  let orderId: string;
  let redis: Redis;
  const correlationId = randomUUID();
  const messageId = randomUUID();
  beforeAll(async () => {
    // An order and its first event, as the orders service writes them, and a journal with entries.
    orderId = randomUUID();
    const orders = new pg.Client({ connectionString: databaseUrls.orders });
    await orders.connect();
    await orders.query(
      `INSERT INTO orders (id, customer_id, customer_email, currency, payment_method, status, version, total_cents, created_at, updated_at)
       VALUES ($1, 'ada', 'ada@example.com', 'eur', 'pm_card_visa', 'PENDING', 1, 4999, now(), now())`,
      [orderId],
    );
    await orders.query(
      `INSERT INTO outbox_messages (message_id, type, envelope, created_at, next_attempt_at)
       VALUES ($1, 'orders.order-placed.v1', $2, now(), now())`,
      [
        messageId,
        JSON.stringify({ messageId, producer: 'orders', aggregateId: orderId, correlationId, causationId: null }),
      ],
    );
    await orders.end();
    redis = new Redis(redisUrl);
    for (let i = 0; i < 3; i++) {
      await redis.xadd(
        journalKey(prefix, 'orders'),
        '*',
        'entry',
        JSON.stringify({
          kind: 'publication',
          process: 'orders',
          contract: 'orders.order-placed.v1',
          producer: 'orders',
          correlationId,
          messageId,
          at: new Date().toISOString(),
          copies: 1,
        }),
      );
    }
  });
  afterAll(() => redis.disconnect());

  const open = (base: string) => {
    const aborted = new AbortController();
    return {
      response: fetch(`${base}/orders/${orderId}/live`, { signal: aborted.signal }),
      close: () => aborted.abort(),
    };
  };

  it("reads a service's journal whole once, then only the entries newer than the last it saw", async () => {
    const monitor = await new Redis(redisUrl).monitor();
    const reads: string[][] = [];
    monitor.on('monitor', (_time: string, args: string[]) => {
      if (args[0]?.toLowerCase() === 'xrange' && args[1] === journalKey(prefix, 'orders')) reads.push(args);
    });
    try {
      await withConsole({ livePollMs: 50 }, async (base) => {
        const live = open(base);
        expect((await live.response).status).toBe(200);
        await expect.poll(() => reads.length, { timeout: 5_000 }).toBeGreaterThanOrEqual(5);
        live.close();
      });
      expect(reads.filter((args) => args[2] === '-')).toHaveLength(1);
      expect(reads.slice(1).every((args) => args[2]!.startsWith('('))).toBe(true);
    } finally {
      monitor.disconnect();
    }
  });

  it('renders what anyone who can write the journal wrote as text, skips what is not an entry, and never fails the page', async () => {
    const delivery = {
      kind: 'delivery',
      at: new Date().toISOString(),
      process: 'notifications',
      consumer: 'notifications.order-placed.v1',
      contract: 'orders.order-placed.v1',
      producer: 'orders',
      messageId,
      correlationId,
      causationId: null,
      attempt: 1,
      durationMs: 2,
      outcome: 'processed',
      deadLettered: false,
    };
    const injected = [
      { ...delivery, reason: '<img src=x onerror=alert(1)>', process: '<b>notifications</b>' },
      { ...delivery, attempt: '<form method="post" action="https://evil.example/">' },
      { ...delivery, at: 'not a time' },
      { ...delivery, durationMs: { toString: 'x' } },
    ];
    const notifications = journalKey(prefix, 'notifications');
    for (const entry of injected) await redis.xadd(notifications, '*', 'entry', JSON.stringify(entry));
    await redis.xadd(notifications, '*', 'entry', '{not json');
    await withConsole({}, async (base) => {
      const res = await fetch(`${base}/orders/${orderId}?fragment=1`);
      expect(res.status).toBe(200);
      const html = await res.text();
      expect(html).not.toContain('evil.example');
      expect(html).not.toContain('<img');
      expect(html).not.toContain('<b>notifications</b>');
      expect(html).toContain('&#60;b&#62;notifications&#60;/b&#62;');
      expect(html).toContain('&#60;img src=x onerror=alert(1)&#62;');
    });
  });

  it('says a committed delivery is settling until its broker lock has expired, and only then that its process died', async () => {
    const orders = new pg.Client({ connectionString: databaseUrls.orders });
    await orders.connect();
    const [placed] = (
      await orders.query<{ message_id: string }>(
        `SELECT message_id FROM outbox_messages WHERE envelope->>'aggregateId' = $1`,
        [orderId],
      )
    ).rows;
    await orders.end();
    const inventory = new pg.Client({ connectionString: databaseUrls.inventory });
    await inventory.connect();
    const fragment = async () =>
      withConsole({ consumerLockMs: 60_000 }, async (base) => {
        html = await (await fetch(`${base}/orders/${orderId}?fragment=1`)).text();
      });
    let html = '';
    try {
      // Committed a moment ago, its journal entry not written yet: settling.
      await inventory.query(
        `INSERT INTO processed_messages (consumer, message_id, body_hash, processed_at) VALUES ('inventory.order-placed.v1', $1, repeat('0', 64), now())`,
        [placed!.message_id],
      );
      await fragment();
      expect(html).toContain('data-settling');
      expect(html).not.toContain('never settled');
      // Committed long before the lock's end and never settled: its process died.
      await inventory.query(`UPDATE processed_messages SET processed_at = now() - interval '2 minutes'`);
      await fragment();
      expect(html).toContain('never settled (its process died)');
      expect(html).not.toContain('data-settling');
    } finally {
      await inventory.end();
    }
  });

  it('sends the timeline as it is now, first: a browser that connects again may hold an older page', async () => {
    await withConsole({ livePollMs: 60_000 }, async (base) => {
      const live = open(base);
      const reader = (await live.response).body!.getReader();
      let text = '';
      while (!text.includes('event: change\ndata: ')) text += new TextDecoder().decode((await reader.read()).value);
      const first = JSON.parse(/^data: (.*)$/m.exec(text.split('event: change\n')[1]!)![1]!) as string;
      expect(first).toBe(await (await fetch(`${base}/orders/${orderId}?fragment=1`)).text());
      live.close();
    });
  });

  it('holds at most maxLiveViews streams at once, each for at most liveViewMs', async () => {
    await withConsole({ maxLiveViews: 1, liveViewMs: 400, livePollMs: 50 }, async (base) => {
      const first = open(base);
      const stream = await first.response;
      expect(stream.status).toBe(200);
      const second = open(base);
      expect((await second.response).status).toBe(503);
      // The first ends by itself within its lifetime; then there is room again.
      await stream.text();
      const third = open(base);
      expect((await third.response).status).toBe(200);
      third.close();
    });
  });
});

describe('the console beyond loopback', () => {
  const OPERATOR = 'console-operator-token-0123456789';
  const login = (base: string, token: string) =>
    fetch(`${base}/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token }),
    });

  it('refuses to start there without an operator token', () => {
    expect(() =>
      createConsole({
        databaseUrls,
        redisUrl,
        queuePrefix: prefix,
        ordersApi: 'http://127.0.0.1:1',
        stripe: { apiBase: 'http://127.0.0.1:1', apiKey: 'sk_test_idem_simulator' },
        processes: {},
        host: '0.0.0.0',
      }),
    ).toThrow(/set ADMIN_TOKEN/);
  });

  it('serves only the operator: a login form for the token, a session once given it, no more guesses from an address that keeps failing, and the token all the same', async () => {
    await withConsole({ host: '0.0.0.0', adminToken: OPERATOR }, async (base) => {
      const anonymous = await fetch(`${base}/`);
      expect(anonymous.status).toBe(401);
      expect(await anonymous.text()).toContain('Operator login');
      expect((await fetch(`${base}/faults`, { method: 'POST' })).status).toBe(401);
      expect((await login(base, 'a-guess')).status).toBe(401);

      const loggedIn = await login(base, OPERATOR);
      expect(loggedIn.status).toBe(303);
      const cookie = loggedIn.headers.get('set-cookie')!;
      expect(cookie).toMatch(/^idem_session=[\w-]+; HttpOnly; SameSite=Strict; Path=\//);
      const session = cookie.split(';')[0]!;
      expect((await fetch(`${base}/`, { headers: { cookie: session } })).status).toBe(200);
      expect((await fetch(`${base}/`, { headers: { cookie: 'idem_session=forged' } })).status).toBe(401);
      expect((await fetch(`${base}/`, { headers: { authorization: `Bearer ${OPERATOR}` } })).status).toBe(200);

      for (let guess = 0; guess < 9; guess++) await login(base, `guess-${guess}`);
      expect((await login(base, 'guess-10')).status).toBe(429); // ten failures: this address's guesses wait
      expect((await login(base, OPERATOR)).status).toBe(303); // the operator's token never does
    });
  });

  it('on 127.0.0.1 asks for nothing, as before', async () => {
    await withConsole({ adminToken: OPERATOR }, async (base) => {
      expect((await fetch(`${base}/`)).status).toBe(200);
    });
  });
});

describe('the console’s orders', () => {
  const OPERATOR = 'console-orders-operator-token-0123';
  /** The orders API, for real, on the console's orders database, checking tokens with `key`. */
  async function ordersApi(key: string): Promise<RunningService> {
    // By a path the console's own code never imports (as demo-data.int.spec.ts starts services).
    const service = 'orders';
    const { startOrders } = (await import(`../../../services/${service}/src/service.ts`)) as {
      startOrders: (config: unknown, options: object) => Promise<RunningService>;
    };
    return startOrders(
      SERVICE_CONFIGS.orders.load({
        DATABASE_URL: databaseUrls.orders,
        IDEM_QUEUE_PREFIX: prefix,
        PORT: '0',
        LOG_LEVEL: 'silent',
        IDEM_ROLES: 'http',
        JWT_SECRET: key,
        ADMIN_TOKEN: OPERATOR,
      }),
      { faults: faultsFromEnv({}) },
    );
  }
  /** Posts the console's own order form for `scenario`, as its page does. */
  async function order(base: string, scenario: string) {
    const csrf = formTokenOf(await (await fetch(`${base}/`)).text())!;
    return fetch(`${base}/orders`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: base, 'sec-fetch-site': 'same-origin' },
      body: new URLSearchParams({ scenario, csrf }).toString(),
    });
  }

  it('places an order as customer `console` with the token it was given, holding no key, and says so once that token expired', async () => {
    const key = 'console-test-customer-token-key-0123456789';
    const orders = await ordersApi(key);
    const api = `http://127.0.0.1:${orders.http.port}`;
    const orderRows = new pg.Pool({ connectionString: databaseUrls.orders, max: 1 });
    try {
      const priced = await fetch(`${api}/catalog/keyboard`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${OPERATOR}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Mechanical keyboard', unitPriceCents: 4999, currency: 'eur' }),
      });
      expect(priced.status).toBe(200);
      const claims = { ...DEFAULT_TOKEN_CLAIMS, secret: key };
      const token = await mintCustomerToken(claims, 'console', { email: 'student@example.com', expiresIn: '30d' });
      await withConsole({ ordersApi: api, customerToken: token }, async (base) => {
        const placed = await order(base, 'paid');
        expect(placed.status).toBe(303);
        const orderId = /^\/orders\/([\w-]+)$/.exec(placed.headers.get('location') ?? '')?.[1];
        expect(orderId).toBeDefined();
        const { rows } = await orderRows.query<{ customer_id: string; customer_email: string }>(
          'SELECT customer_id, customer_email FROM orders WHERE id = $1',
          [orderId],
        );
        expect(rows).toEqual([{ customer_id: 'console', customer_email: 'student@example.com' }]);
      });
      const expired = await mintCustomerToken(claims, 'console', { email: 'student@example.com', expiresIn: '-1m' });
      await withConsole({ ordersApi: api, customerToken: expired }, async (base) => {
        const refused = await order(base, 'paid');
        expect(refused.status).toBe(303);
        const notice = new URL(refused.headers.get('location')!, base).searchParams.get('notice');
        expect(notice).toMatch(/refused the console's customer token \(401/);
        expect(notice).toMatch(/Start the console again/);
      });
    } finally {
      await orderRows.end();
      await orders.stop();
    }
  });
});
