/**
 * The console's explorer on a PostgreSQL server of the test's own, with a connection limit as
 * small as a laptop's: twenty explorations asked for at once, and one its client gives up. The
 * console makes its scratch databases as the native run and compose have it do, as a role that
 * may create databases and is no superuser; the orders service beside it is a real process on
 * the same server, as a role of its own, placing orders throughout. The server is reached through
 * a network path the test can slow down, to hold a run long enough to leave it.
 */
import type { ChildProcess } from 'node:child_process';
import { randomInt, randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { DEFAULT_TOKEN_CLAIMS, mintCustomerToken } from '@idem/http';
import { SERVICE_NAMES, type ServiceName } from '@idem/shop';
import type { NetworkPath, PostgresServer } from '@idem/testkit';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

/** Connections the server takes from roles that are not superusers (30, less its 3 reserved ones). */
const MAX_CONNECTIONS = 30;
const SCRATCH_ROLE = 'explorer_scratch';
const ORDERS_ROLE = 'orders';
const JWT_SECRET = 'explorer-bound-test-signing-key-0123456789';
const ADMIN_TOKEN = 'explorer-bound-test-operator-token';

let server: PostgresServer;
let path: NetworkPath;
let orders: ChildProcess;
let ordersApi: string;
let consoleBase: string;
let stop: () => Promise<void>;
const prefix = `idem_test_explorer_bound_${Date.now().toString(36)}`;

/** The server as `role`: straight to it, or through the path the test slows down. */
const urlAs = (role: string, database = '', port = server.port) =>
  `postgresql://${role}@127.0.0.1:${port}${database ? `/${database}` : ''}`;

async function query<T extends pg.QueryResultRow>(url: string, sql: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {}); // a session the explorer's drop ends
  await client.connect();
  try {
    return (await client.query<T>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

/** The scratch databases on the server now. */
const scratchDatabases = async () =>
  (
    await query<{ datname: string }>(
      urlAs('postgres', 'postgres'),
      `SELECT datname FROM pg_database WHERE datname LIKE 'idem\\_test\\_explore\\_%'`,
    )
  ).map((row) => row.datname);

beforeAll(async () => {
  const { createPostgresServer, startNetworkPath, startScript } = await import('@idem/testkit');
  server = await createPostgresServer({
    port: randomInt(26_100, 26_900),
    settings: { max_connections: String(MAX_CONNECTIONS) },
  });
  await server.start();
  path = await startNetworkPath({ host: '127.0.0.1', port: server.port });
  await query(urlAs('postgres', 'postgres'), `CREATE ROLE ${SCRATCH_ROLE} LOGIN CREATEDB`);
  await query(urlAs('postgres', 'postgres'), `CREATE ROLE ${ORDERS_ROLE} LOGIN`);
  await query(urlAs('postgres', 'postgres'), `CREATE DATABASE orders OWNER ${ORDERS_ROLE}`);
  // Where the console's explorer makes its databases: the scratch role, through the path. The
  // test kit reads TEST_POSTGRES_URL when it is loaded, as the console's process does: it is
  // loaded again from here on.
  process.env.TEST_POSTGRES_URL = urlAs(SCRATCH_ROLE, '', path.port);
  vi.resetModules();

  const { postgresServerUrl } = await import('@idem/testkit');
  if (postgresServerUrl !== process.env.TEST_POSTGRES_URL)
    throw new Error('the test kit was not loaded again: the explorer would use the shared server');
  const { migrate } = await import('@idem/database');
  const { SERVICE_CONFIGS } = await import('../../repository/service-configs.js');
  await migrate({
    databaseUrl: urlAs(ORDERS_ROLE, 'orders'),
    migrationsDir: fileURLToPath(new URL('../../../services/orders/prisma/migrations', import.meta.url)),
    include: SERVICE_CONFIGS.orders.tables,
    log: () => {},
  });
  const port = randomInt(27_000, 27_900);
  ordersApi = `http://127.0.0.1:${port}`;
  orders = startScript(new URL('../../../services/orders/src/main.ts', import.meta.url), {
    DATABASE_URL: urlAs(ORDERS_ROLE, 'orders'),
    DATABASE_POOL_MAX: '4',
    REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    IDEM_QUEUE_PREFIX: prefix,
    IDEM_ROLES: 'http',
    PORT: String(port),
    LOG_LEVEL: 'silent',
    JWT_SECRET,
    ADMIN_TOKEN,
    RATE_LIMIT_ORDERS_PER_CUSTOMER: '1000000',
    RATE_LIMIT_ORDERS_PER_ADDRESS: '1000000',
  });
  orders.stdout?.resume();
  for (
    let tries = 0;
    !(await fetch(`${ordersApi}/health`).then(
      (r) => r.ok,
      () => false,
    ));
    tries++
  ) {
    if (tries > 300) throw new Error('the orders service did not start');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const priced = await fetch(`${ordersApi}/catalog/keyboard`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` },
    body: JSON.stringify({ name: 'Keyboard', unitPriceCents: 4999, currency: 'eur' }),
  });
  expect(priced.status).toBeLessThan(300);

  const { createConsole } = await import('./console.js');
  const console_ = createConsole({
    // Never read here: the explorer's page reads no service's database.
    databaseUrls: Object.fromEntries(SERVICE_NAMES.map((service) => [service, ''])) as Record<ServiceName, string>,
    redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    queuePrefix: prefix,
    ordersApi,
    processes: {},
    explorer: true,
  });
  const listening = await console_.listen(0);
  consoleBase = `http://127.0.0.1:${(listening.address() as { port: number }).port}`;
  stop = async () => {
    listening.closeAllConnections();
    listening.close();
    await console_.close();
  };
}, 120_000);

afterAll(async () => {
  await stop?.();
  orders?.kill('SIGKILL');
  await path?.close();
  await server?.destroy();
  const { deleteQueues } = await import('@idem/testkit');
  await deleteQueues(prefix);
});

/** POST one of the explorer's forms, with the form token its page carries. */
async function explore(way: 'right' | 'wrong', signal?: AbortSignal): Promise<Response> {
  const page = await (await fetch(`${consoleBase}/explorer`)).text();
  const csrf = /name="csrf" value="([^"]+)"/.exec(page)![1]!;
  return fetch(`${consoleBase}/explorer/${way}`, {
    method: 'POST',
    body: new URLSearchParams({ csrf }),
    ...(signal ? { signal } : {}),
  });
}

/** An order placed as a customer, straight at the orders API. */
async function placeOrder(): Promise<number> {
  const token = await mintCustomerToken({ secret: JWT_SECRET, ...DEFAULT_TOKEN_CLAIMS }, 'explorer-test', {
    email: 'explorer-test@example.com',
  });
  const res = await fetch(`${ordersApi}/orders`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': randomUUID(), authorization: `Bearer ${token}` },
    body: JSON.stringify({ paymentMethod: 'pm_card_visa', lines: [{ sku: 'keyboard', quantity: 1 }] }),
  });
  await res.arrayBuffer();
  return res.status;
}

describe("the console's explorer", () => {
  it('runs one exploration at a time: of twenty at once, nineteen are told to come back, and orders are placed throughout', async () => {
    const asked = Array.from({ length: 20 }, () => explore('right'));
    let settled = false;
    const answers = Promise.all(asked).finally(() => (settled = true));
    // While they are asked for: an order, and a fresh connection as the orders service's role.
    const failures: string[] = [];
    let probes = 0;
    do {
      probes++;
      const status = await placeOrder().catch((error: Error) => error.message);
      if (status !== 201) failures.push(`POST /orders: ${status}`);
      await query(urlAs(ORDERS_ROLE, 'orders'), 'SELECT 1').catch((error: Error) =>
        failures.push(`a new connection: ${error.message}`),
      );
    } while (!settled);
    expect(failures).toEqual([]);
    expect(probes).toBeGreaterThan(0);
    const statuses = (await answers).map((res) => res.status);
    expect(statuses.filter((status) => status === 429)).toHaveLength(19);
    expect(statuses.filter((status) => status === 200)).toHaveLength(1);
    for (const res of await answers)
      if (res.status === 429) expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    const explored = await (await answers).find((res) => res.status === 200)!.text();
    expect(Number(/id="schedules">(\d+)</.exec(explored)?.[1])).toBeGreaterThan(1);
    expect(await scratchDatabases()).toEqual([]);
  }, 120_000);

  it('stops a run its client left, and drops its database at once', async () => {
    // Each statement now waits a round trip of 200 ms: once under way, a run has some twenty
    // seconds still to go.
    path.latency(100);
    try {
      const leaving = new AbortController();
      const asked = explore('right', leaving.signal).catch(() => undefined);
      // Once the run is in its schedules (a session of its database has emptied the tables for one)...
      let database: string | undefined;
      for (const started = Date.now(); !database; await new Promise((resolve) => setTimeout(resolve, 20))) {
        if (Date.now() - started > 60_000) throw new Error('the exploration never got under way');
        const [scheduling] = await query<{ datname: string }>(
          urlAs('postgres', 'postgres'),
          `SELECT datname FROM pg_stat_activity
            WHERE datname LIKE 'idem\\_test\\_explore\\_%' AND query LIKE 'DO $$ BEGIN DELETE FROM %'`,
        );
        database = scheduling?.datname;
      }
      // ...the client leaves.
      leaving.abort();
      await asked;
      const left = Date.now();
      while ((await scratchDatabases()).includes(database)) {
        expect(Date.now() - left, 'the database is dropped long before the run would have ended').toBeLessThan(5_000);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    } finally {
      path.latency(0);
    }
    // The console takes the next one once the run has closed what it had open (a moment later).
    const freed = Date.now();
    let next = await explore('wrong');
    while (next.status === 429 && Date.now() - freed < 15_000) {
      await new Promise((resolve) => setTimeout(resolve, 200));
      next = await explore('wrong');
    }
    expect(next.status).toBe(200);
  }, 120_000);
});
