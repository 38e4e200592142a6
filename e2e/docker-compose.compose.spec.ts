/**
 * `docker compose up` for real (`pnpm test:compose`): a clean copy of the repository, the README's
 * first run, then what a user does with the system — orders paid, rejected and refunded through
 * the published ports, an Idempotency-Key replay, a worker restarted and one killed mid-flow, a
 * worker scaled out, `down` and `up` again — with the exactly-once checker reading the compose
 * system's own databases, provider and mail server. `down -v` at the end.
 *
 * The compose command is IDEM_COMPOSE (default `docker compose`); on a machine with no registry,
 * `.ci/run` points it at ../shared/compose-engine/dc.sh, which runs the same file on a local
 * engine with stand-ins for the base images. It refuses to start when this project already has
 * containers (it would take them down), and finds containers by compose's labels, not names.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fetchMailApi, formatReport, runChecks } from '@idem/checker';
import { asOperator, getJson, placeOrder, runStories, SERVICES, waitForStatus } from '@idem/native-run';
import { waitFor } from '@idem/testkit';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, screenshotPath } from './browser.js';
import { EXERCISE_TIMEOUT_MS, EXERCISES, switchAllOff, type Classroom } from './exercises.js';
import type { Browser } from 'playwright-core';
import { placeTracedOrder, traceGapsOnceQuiet, type TracedSpan } from './support.js';

const repository = fileURLToPath(new URL('..', import.meta.url));
const [composeCommand, ...composeArgs] = (process.env.IDEM_COMPOSE || 'docker compose').split(/\s+/);
/** What one service image's /app may weigh (MB): its bundles and the npm packages they import. */
const APP_BUDGET_MB = 110;

// Host ports of their own, clear of a developer's `docker compose up` and `pnpm start`.
const PORTS = {
  ORDERS_HOST_PORT: 23001,
  INVENTORY_HOST_PORT: 23002,
  PAYMENTS_HOST_PORT: 23003,
  NOTIFICATIONS_HOST_PORT: 23004,
  CONSOLE_HOST_PORT: 23005,
  STRIPE_SIM_HOST_PORT: 23111,
  MAILPIT_HOST_PORT: 23025,
  MAILPIT_SMTP_HOST_PORT: 23026,
  POSTGRES_HOST_PORT: 23432,
  REDIS_HOST_PORT: 23379,
  JAEGER_HOST_PORT: 23686,
  JAEGER_OTLP_HOST_PORT: 23318,
  PROMETHEUS_HOST_PORT: 23090,
  GRAFANA_HOST_PORT: 23000,
};
const local = (port: number) => `http://127.0.0.1:${port}`;
const urls = {
  orders: local(PORTS.ORDERS_HOST_PORT),
  inventory: local(PORTS.INVENTORY_HOST_PORT),
  payments: local(PORTS.PAYMENTS_HOST_PORT),
  notifications: local(PORTS.NOTIFICATIONS_HOST_PORT),
};

let project: string;
let secrets: {
  adminToken: string;
  paymentsAdminToken: string;
  notificationsAdminToken: string;
  jwtSecret: string;
  consoleDbPassword: string;
  simulatorKey: string;
  mailApi: string;
};

/** A compose command in the project, as it ended. */
const composeRun = (args: string[], timeoutMs = 120_000) =>
  spawnSync(composeCommand!, [...composeArgs, ...args], {
    cwd: project,
    env: { ...process.env, ...Object.fromEntries(Object.entries(PORTS).map(([k, v]) => [k, String(v)])) },
    encoding: 'utf8',
    timeout: timeoutMs,
    maxBuffer: 64 * 1024 * 1024,
  });

function compose(args: string[], timeoutMs = 120_000): string {
  const result = composeRun(args, timeoutMs);
  if (result.status !== 0) {
    throw new Error(`${composeCommand} ${[...composeArgs, ...args].join(' ')}: ${result.status}\n${result.stderr}`);
  }
  return result.stdout;
}

const docker = (args: string[]) => execFileSync('docker', args, { encoding: 'utf8', timeout: 120_000 }).trim();

interface Container {
  id: string;
  service: string;
  image: string;
  state: { Status: string; ExitCode: number; Health?: { Status: string } };
}

/** Every container of the project (running or not), by compose's labels. */
function containers(): Container[] {
  const ids = compose(['ps', '-a', '-q']).split('\n').filter(Boolean);
  if (ids.length === 0) return [];
  return (
    JSON.parse(docker(['inspect', ...ids])) as {
      Id: string;
      Config: { Image: string; Labels: Record<string, string> };
      State: Container['state'];
    }[]
  ).map((c) => ({
    id: c.Id,
    service: c.Config.Labels['com.docker.compose.service']!,
    image: c.Config.Image,
    state: c.State,
  }));
}

/** The one-shot services: each has done its work when it has exited (with 0, which the tests check). */
const ONE_SHOT = new Set(['secrets', 'migrate', 'seed']);

/** Until every container is healthy (or, for a one-shot service, exited). */
async function allHealthy(timeoutMs = 240_000): Promise<Container[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const all = containers();
    const pending = all.filter((c) =>
      ONE_SHOT.has(c.service)
        ? c.state.Status !== 'exited'
        : c.state.Status !== 'running' || (c.state.Health && c.state.Health.Status !== 'healthy'),
    );
    if (all.length > 0 && pending.length === 0) return all;
    if (Date.now() > deadline) {
      throw new Error(`not healthy: ${pending.map((c) => `${c.service} ${c.state.Status}`).join(', ')}`);
    }
    await sleep(2_000);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A clean copy: what git tracks (and what is new and not ignored), nothing built, no .env. */
function cleanCopy(): string {
  const dir = mkdtempSync(join(tmpdir(), 'idem-compose-'));
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: repository,
    encoding: 'utf8',
  })
    .split('\0')
    .filter(Boolean);
  for (const file of files) {
    try {
      mkdirSync(dirname(join(dir, file)), { recursive: true });
      cpSync(join(repository, file), join(dir, file));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error; // deleted, not yet committed
    }
  }
  return dir;
}

/** The console's operator (its login); each API has a token of its own. */
const operator = () => asOperator(secrets.adminToken);

/** Mailpit's API on its published port, with the console's login (its API answers to nobody else). */
function mailpitApi(): string {
  const api = new URL(secrets.mailApi);
  api.host = `127.0.0.1:${PORTS.MAILPIT_HOST_PORT}`;
  return api.href;
}

/** The checker against the compose system: its databases as the read-only console role. */
function check() {
  const database = (service: string) =>
    `postgresql://console:${secrets.consoleDbPassword}@127.0.0.1:${PORTS.POSTGRES_HOST_PORT}/${service}`;
  return runChecks({
    databaseUrls: Object.fromEntries(SERVICES.map((s) => [s, database(s)])) as Record<
      (typeof SERVICES)[number],
      string
    >,
    stripe: { apiBase: local(PORTS.STRIPE_SIM_HOST_PORT), apiKey: secrets.simulatorKey },
    mailApi: mailpitApi(),
    quietWindowMs: 5_000,
    stuckAfterMs: 60_000,
  });
}

/**
 * Every span the trace collector holds: the stand-in's own dump when it is the stand-in, else
 * Jaeger's query API (each service's traces, references as parents and links).
 */
async function collectedSpans(): Promise<TracedSpan[]> {
  const jaeger = local(PORTS.JAEGER_HOST_PORT);
  const standIn = await fetch(`${jaeger}/standin/spans`);
  if (standIn.ok) return (await standIn.json()) as TracedSpan[];
  interface JaegerTrace {
    processes: Record<string, { serviceName: string }>;
    spans: {
      traceID: string;
      spanID: string;
      operationName: string;
      processID: string;
      references: { refType: string; traceID: string; spanID: string }[];
      tags: { key: string; value: unknown }[];
    }[];
  }
  const KINDS: Record<string, number> = { internal: 1, server: 2, client: 3, producer: 4, consumer: 5 };
  const spans = new Map<string, TracedSpan>();
  for (const service of [...SERVICES, 'console']) {
    const { data } = await getJson<{ data: JaegerTrace[] }>(
      `${jaeger}/api/traces?service=${service}&limit=1000&lookback=1h`,
    );
    for (const t of data) {
      for (const span of t.spans) {
        const tags = Object.fromEntries(span.tags.map((tag) => [tag.key, tag.value]));
        const parent = span.references.find((r) => r.refType === 'CHILD_OF' && r.traceID === span.traceID);
        spans.set(span.spanID, {
          service: t.processes[span.processID]!.serviceName,
          name: span.operationName,
          traceId: span.traceID,
          spanId: span.spanID,
          parentSpanId: parent?.spanID,
          kind: KINDS[String(tags['span.kind'])] ?? 1,
          links: span.references.filter((r) => r !== parent).map((r) => ({ traceId: r.traceID, spanId: r.spanID })),
          attributes: tags,
        });
      }
    }
  }
  return [...spans.values()];
}

/**
 * Places `count` orders of one `sku`, each as a customer of its own: the orders API allows a
 * customer 30 orders a minute, as it would any real one.
 */
async function placeOrders(count: number, sku = 'cable') {
  return Promise.all(
    Array.from({ length: count }, async () => {
      const customer = `shopper-${randomUUID().slice(0, 8)}`;
      const order = await placeOrder(urls, [{ sku, quantity: 1 }], 'pm_card_visa', undefined, customer);
      return { ...order, customer };
    }),
  );
}

/**
 * A student at the console, logged in: the published port reaches it from the engine's network,
 * so it asks for the operator token.
 */
async function studentAtTheConsole(browser: Browser) {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const console_ = local(PORTS.CONSOLE_HOST_PORT);
  await page.goto(console_);
  await page.getByLabel('Operator token').fill(secrets.adminToken);
  await page.getByRole('button', { name: 'Log in' }).click();
  await page.waitForURL(`${console_}/`);
  return { page, console_ };
}

async function allPaid(orders: { orderId: string; customer?: string }[]) {
  const ended = await Promise.all(
    orders.map((o) => waitForStatus(urls, o.orderId, new Set(['PAID']), 120_000, o.customer)),
  );
  expect(ended.map((o) => o.status)).toEqual(orders.map(() => 'PAID'));
}

beforeAll(async () => {
  project = cleanCopy();
  if (compose(['ps', '-a', '-q']).trim()) {
    const copy = project;
    project = ''; // afterAll must not take down what was there before
    rmSync(copy, { recursive: true, force: true });
    throw new Error('this compose project has containers already; `docker compose down` it first');
  }
  // The README's first run: one command, nothing before it.
  compose(['up', '-d', '--build'], 1_200_000);
  await allHealthy();
  // The secrets the first start made, read as docs/compose.md says: each from a container that holds it.
  const secret = (container: string, name: string) =>
    compose(['exec', '-T', container, 'cat', `/run/idem-secrets/${name}`]);
  secrets = {
    adminToken: secret('console', 'admin-token'), // README's step 1
    // docs/compose.md: each API's operator token, in its own container.
    paymentsAdminToken: secret('payments-api', 'payments-admin-token'),
    notificationsAdminToken: secret('notifications-api', 'notifications-admin-token'),
    jwtSecret: secret('orders-api', 'jwt-secret'),
    consoleDbPassword: new URL(secret('console', 'console-orders-database-url')).password,
    simulatorKey: secret('stripe-sim', 'simulator-api-key'),
    mailApi: secret('console', 'console-mail-api-url'),
  };
  process.env.JWT_SECRET = secrets.jwtSecret; // the customer tokens placeOrder mints
}, 1_500_000);

afterAll(() => {
  if (!project) return;
  try {
    compose(['down', '-v', '--remove-orphans'], 300_000);
  } finally {
    rmSync(project, { recursive: true, force: true });
  }
}, 300_000);

describe('docker compose up on a real engine', () => {
  it('starts every container healthy; the secrets, migrate and seed jobs exit 0', () => {
    const all = containers();
    const services = new Set(all.map((c) => c.service));
    for (const service of [
      'secrets',
      'postgres',
      'redis',
      'migrate',
      'orders-api',
      'orders',
      'inventory',
      'payments',
      'notifications',
      'console',
    ]) {
      expect(services, service).toContain(service);
    }
    for (const c of all.filter((c) => ONE_SHOT.has(c.service))) expect(c.state.ExitCode, c.service).toBe(0);
    for (const c of all.filter((c) => !ONE_SHOT.has(c.service) && c.state.Health)) {
      expect(c.state.Health!.Status, c.service).toBe('healthy');
    }
  });

  it('keeps the generated secrets out of every container configuration (docker inspect)', () => {
    const ids = containers().map((c) => c.id);
    const configuration = docker(['inspect', ...ids]);
    for (const [name, value] of Object.entries(secrets)) expect(configuration.includes(value), name).toBe(false);
    expect(configuration).toContain('JWT_SECRET_FILE=/run/idem-secrets/jwt-secret');
  });

  it("gives each container only its own secrets: a worker reads neither the superuser's password nor an operator token, an API no other API's, and its Redis user reaches only its queues", async () => {
    const read = (container: string, name: string) =>
      composeRun(['exec', '-T', container, 'cat', `/run/idem-secrets/${name}`]);
    for (const name of ['postgres-password', 'admin-token', 'orders-admin-token', 'jwt-secret', 'orders-database-url'])
      expect(read('inventory', name).status, name).not.toBe(0);
    // An API holds its own operator token, no other API's, and it opens no other API.
    expect(read('inventory-api', 'orders-admin-token').status).not.toBe(0);
    const inventoryToken = read('inventory-api', 'inventory-admin-token').stdout;
    expect((await fetch(`${urls.orders}/dead-letters`, { headers: asOperator(inventoryToken) })).status).toBe(403);
    expect((await fetch(`${urls.inventory}/dead-letters`, { headers: asOperator(inventoryToken) })).status).toBe(200);
    expect(read('postgres', 'postgres-password').status).toBe(0);
    const redis = new URL(read('inventory', 'inventory-redis-url').stdout.trim());
    redis.host = `127.0.0.1:${PORTS.REDIS_HOST_PORT}`;
    const inventory = new Redis(redis.toString(), { maxRetriesPerRequest: 1 });
    try {
      expect(await inventory.llen('idem:inventory.order-placed.v1:wait')).toBeGreaterThanOrEqual(0);
      await expect(inventory.lpush('idem:orders.payment-captured.v1:wait', 'forged')).rejects.toThrow(/NOPERM/);
    } finally {
      inventory.disconnect();
    }
  });

  it(`builds lean images: /app within ${APP_BUDGET_MB} MB, owned by root and not writable by the process`, () => {
    const images = new Map(all().map((c) => [c.image, c.service]));
    expect(images.size).toBeGreaterThanOrEqual(6); // migrate, four services, console, the simulator
    for (const [image, service] of images) {
      const megabytes = Number(docker(['run', '--rm', '--entrypoint', 'du', image, '-sm', '/app']).split(/\s/)[0]);
      console.log(`image of ${service}: /app ${megabytes} MB`);
      expect(megabytes, service).toBeLessThanOrEqual(APP_BUDGET_MB);
      const write = spawnSync('docker', ['run', '--rm', '--entrypoint', 'sh', image, '-c', 'touch /app/dist/x'], {
        encoding: 'utf8',
      });
      expect(write.status, `${service} could write its own code`).not.toBe(0);
    }
    function all() {
      return containers().filter(
        (c) =>
          !['postgres', 'redis', 'redis-script-watcher', 'mailpit', 'jaeger', 'prometheus', 'grafana'].includes(
            c.service,
          ),
      );
    }
  });

  it('tells the demo stories through the published ports: paid, rejected, declined, refunded', async () => {
    const results = await runStories(urls, {
      payments: secrets.paymentsAdminToken,
      notifications: secrets.notificationsAdminToken,
    });
    expect(results.map((r) => [r.story, r.status, r.ok])).toEqual([
      ['paid', 'PAID', true],
      ['rejected for stock', 'REJECTED', true],
      ['card declined', 'PAYMENT_FAILED', true],
      ['cancelled after payment', 'REFUNDED', true],
    ]);
  }, 180_000);

  it('answers an Idempotency-Key replay with the first order', async () => {
    const key = `compose-${Date.now()}`;
    const first = await placeOrder(urls, [{ sku: 'cable', quantity: 2 }], 'pm_card_visa', key);
    const again = await placeOrder(urls, [{ sku: 'cable', quantity: 2 }], 'pm_card_visa', key);
    expect(again.orderId).toBe(first.orderId);
    await allPaid([first]);
  }, 180_000);

  it('loses nothing when a worker is restarted and another SIGKILLed mid-flow', async () => {
    const orders = await placeOrders(20);
    compose(['restart', 'payments']);
    compose(['kill', '-s', 'SIGKILL', 'inventory']);
    compose(['up', '-d', '--no-deps', 'inventory']);
    await allPaid(orders);
    await allHealthy();
  }, 300_000);

  it('spreads deliveries over a scaled-out worker', async () => {
    compose(['up', '-d', '--no-deps', '--scale', 'inventory=3', 'inventory']);
    const replicas = (await allHealthy()).filter((c) => c.service === 'inventory');
    expect(replicas).toHaveLength(3);
    await allPaid(await placeOrders(30));
    const processed = replicas.map((c) => {
      const metrics = docker([
        'exec',
        c.id,
        'node',
        '-e',
        "fetch('http://127.0.0.1:3002/metrics').then(r=>r.text()).then(t=>console.log(t))",
      ]);
      return [...metrics.matchAll(/^idem_deliveries_total\{[^}]*outcome="processed"[^}]*\} (\d+)/gm)].reduce(
        (sum, [, n]) => sum + Number(n),
        0,
      );
    });
    console.log(`inventory replicas processed ${processed.join(' / ')} deliveries`);
    expect(processed.filter((n) => n > 0).length).toBeGreaterThanOrEqual(2);
    compose(['up', '-d', '--no-deps', '--scale', 'inventory=1', 'inventory']);
  }, 300_000);

  it("exports every process's spans; one order's trace graph reaches its request, every delivery, the provider call and both e-mails", async () => {
    const { orderId, traceId } = await placeTracedOrder(urls.orders);
    await allPaid([{ orderId }]);
    expect(await traceGapsOnceQuiet(() => collectedSpans(), traceId, orderId, 60_000)).toEqual([]);
    // The console is traced too: a person looking at the order — the operator: it serves the
    // compose network, so anyone else gets its login form.
    const timeline = `${local(PORTS.CONSOLE_HOST_PORT)}/orders/${orderId}`;
    expect((await fetch(timeline)).status).toBe(401);
    expect((await fetch(timeline, { headers: operator() })).status).toBe(200);
    await waitFor(
      async () =>
        (await getJson<{ data: string[] }>(`${local(PORTS.JAEGER_HOST_PORT)}/api/services`)).data.includes('console'),
      { timeoutMs: 30_000, what: "the console's spans" },
    );
    const services = (await getJson<{ data: string[] }>(`${local(PORTS.JAEGER_HOST_PORT)}/api/services`)).data;
    expect(services).toEqual(expect.arrayContaining([...SERVICES, 'console']));
  }, 180_000);

  it('runs a lesson from the console: the mistake made on purpose, then the right way, each with its verdict', async () => {
    const browser = await launchChromium();
    try {
      const { page, console_ } = await studentAtTheConsole(browser);
      // The lesson, from the console: a mistake made on purpose, in a process the crash switch kills
      // for real (the lesson's consumer, a bundle of the console's image), then the right way.
      await page.goto(`${console_}/lessons`);
      expect(await page.locator('tr[data-lesson]').count()).toBe(4);
      await page
        .locator('tr[data-lesson="separate-dedupe-transaction"]')
        .getByRole('button', { name: 'run it both ways' })
        .click({ timeout: 180_000 }); // the answer comes once both runs ended
      await page.locator('pre[data-way="right"]').waitFor();
      expect(await page.locator('pre[data-way="wrong"]').textContent()).toContain('applied 2× → DOUBLED');
      expect(await page.locator('pre[data-way="right"]').textContent()).toContain('applied 1× → EXACTLY ONCE');
      await page.screenshot({ path: await screenshotPath('compose-lesson'), fullPage: true });
    } finally {
      await browser.close();
    }
  }, 300_000);

  it('keeps orders and stock across down and up; the migrations run again as a no-op', async () => {
    const [order] = await placeOrders(1, 'keyboard');
    await allPaid([order!]);
    // PAID is orders' word; inventory commits the reservation when it takes the capture, a moment later.
    const stock = await waitFor(
      async () => {
        const now = await getJson<{ reserved: number }>(`${urls.inventory}/stock/keyboard`);
        return now.reserved === 0 && now;
      },
      { what: "inventory's reservations committed" },
    );
    compose(['down'], 300_000);
    compose(['up', '-d'], 600_000);
    await allHealthy();
    expect((await waitForStatus(urls, order!.orderId, new Set(['PAID']), 60_000, order!.customer)).status).toBe('PAID');
    expect(await getJson(`${urls.inventory}/stock/keyboard`)).toEqual(stock);
    const migrateLog = compose(['logs', '--no-color', 'migrate']);
    for (const service of SERVICES)
      expect(migrateLog).toContain(`${service}: database up to date (0 migration(s) applied)`);
    expect(migrateLog).not.toContain('applied migration');
    expect(
      (
        await getJson<{ emails: unknown[] }>(
          `${urls.notifications}/emails?orderId=${order!.orderId}`,
          asOperator(secrets.notificationsAdminToken),
        )
      ).emails,
    ).not.toEqual([]);
  }, 900_000);

  describe("README's see-it steps and concepts.md's exercises, as written, under compose", () => {
    let browser: Browser;
    let classroom: Classroom;
    beforeAll(async () => {
      browser = await launchChromium();
      const { page, console_ } = await studentAtTheConsole(browser);
      const search = await fetchMailApi(mailpitApi(), '/api/v1/search?query=message-id:probe', undefined);
      classroom = { page, console: console_, runs: 'compose', mailSearch: search.status !== 404 };
    });
    // README step 5: "switch all off" when you are done.
    afterEach(async () => {
      for (const process of SERVICES) await switchAllOff(classroom, process);
    });
    afterAll(() => browser?.close());
    for (const exercise of EXERCISES) it(exercise.title, () => exercise.run(classroom), EXERCISE_TIMEOUT_MS);
  });

  it('passes the exactly-once checker: nothing lost, doubled, mischarged or stuck', async () => {
    const report = await check();
    expect(
      report.findings.filter((f) => f.check !== 'crash_window_send'),
      formatReport(report),
    ).toEqual([]);
    expect(report.ok, formatReport(report)).toBe(true);
  }, 120_000);
});
