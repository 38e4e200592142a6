/**
 * The image's build and runtime steps, natively (no Docker engine here): bundle a service,
 * `pnpm deploy` it with production dependencies only and prune that to what the bundles import
 * (as infra/Dockerfile does), delete its sources, and run the bundle with plain node and the image's command — migrate, serve health
 * and metrics, consume, trace, and stop on SIGTERM.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomInt, randomUUID } from 'node:crypto';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DEFAULT_TOKEN_CLAIMS, mintCustomerToken } from '@idem/http';
import { createPublisher } from '@idem/messaging';
import { dropDatabase } from '@idem/database';
import { buildService, deployPackage, deployServices, pruneDeploy, type DeployedServices } from '@idem/native-run';
import {
  deleteQueues,
  exited,
  orderPlacedMessage,
  postgresServerUrl,
  startOtlpReceiver,
  uniqueName,
  waitFor,
  type ReceivedSpan,
} from '@idem/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MIGRATE_IMAGE_SERVICES, SERVICE_IMAGE_COMMAND } from './compose-file.js';
import { shop } from '@idem/shop';

const root = fileURLToPath(new URL('../..', import.meta.url));
const SERVICES = ['orders', 'inventory'] as const;
type Service = (typeof SERVICES)[number];
const databaseUrls = {} as Record<Service, string>;
const prefix = uniqueName('idem_test_bundle');
const port = randomInt(6_000, 7_000); // below the ephemeral port range and the e2e systems' ports

let deploys: DeployedServices<Service> | undefined;

beforeAll(async () => {
  deploys = await deployServices(SERVICES);
  for (const service of SERVICES) {
    databaseUrls[service] = `${postgresServerUrl}/${uniqueName(`idem_test_bundle_${service}`)}`;
    execFileSync(process.execPath, ['dist/migrate.js'], {
      cwd: deploys.dirs[service],
      env: { PATH: process.env.PATH, DATABASE_URL: databaseUrls[service] },
      stdio: 'pipe',
    });
  }
}, 300_000);

afterAll(async () => {
  deploys?.remove();
  for (const databaseUrl of Object.values(databaseUrls)) await dropDatabase(databaseUrl);
  await deleteQueues(prefix);
});

/** Starts a deployed service with the image's command and plain node, on `port`. */
function startBundle(service: Service, servicePort: number, env: Record<string, string> = {}) {
  const [, ...args] = SERVICE_IMAGE_COMMAND;
  const child = spawn(process.execPath, args, {
    cwd: deploys!.dirs[service],
    env: {
      PATH: process.env.PATH,
      DATABASE_URL: databaseUrls[service],
      IDEM_QUEUE_PREFIX: prefix,
      PORT: String(servicePort),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const url = `http://127.0.0.1:${servicePort}`;
  const spawnedAt = Date.now();
  let last = 'nothing yet';
  // A bundle loading OpenTelemetry's instrumentations on two cores that the int tier's builds
  // share can take tens of seconds to listen (a CI run saw it start 20 s late): a start, not a timing.
  // What the process printed, how it ended if it did, and the last answer, as of the moment the wait ended.
  const healthy = () =>
    waitFor(
      async () => {
        const res = await fetch(`${url}/health`).catch((error: Error) => void (last = error.message));
        return res && ((last = `${res.status}`), res.json());
      },
      { what: `${service}'s bundle to answer /health`, timeoutMs: 90_000 },
    ).catch((error: Error) => {
      const since = `spawned at ${spawnedAt}, ${Date.now() - spawnedAt} ms ago`;
      throw new Error(
        `${error.message}; ${since}; last answer: ${last}; exit ${child.exitCode ?? child.signalCode ?? 'not yet'}; output: ${output}`,
      );
    });
  /** SIGTERM, then the exit code; a failure shows what the process printed. */
  const stop = async () => {
    child.kill('SIGTERM');
    const code = await exited(child);
    expect(code, `${service}'s bundle exited ${code} on SIGTERM; output: ${output}`).toBe(0);
  };
  /** The JSON lines it printed so far (its log). */
  const lines = () =>
    output.split('\n').flatMap((line) => {
      try {
        return [JSON.parse(line) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
  return { url, healthy, stop, lines };
}

describe('the migrate image', () => {
  it("runs every service's migrate bundle from a service's production deploy without its files, as infra/Dockerfile builds it", async () => {
    const services = MIGRATE_IMAGE_SERVICES;
    const dir = mkdtempSync(join(tmpdir(), 'idem-deploy-migrate-'));
    const urls = services.map((service) => `${postgresServerUrl}/${uniqueName(`idem_test_migrate_image_${service}`)}`);
    await deployPackage('@idem/orders', dir);
    for (const entry of readdirSync(dir))
      if (entry !== 'node_modules' && entry !== 'package.json') rmSync(join(dir, entry), { recursive: true });
    try {
      for (const service of services) {
        await buildService(service);
        cpSync(join(root, 'services', service, 'dist'), join(dir, 'services', service, 'dist'), { recursive: true });
        // Its own migrations, and the packages' tables the build copied beside its bundles.
        for (const folder of ['prisma/migrations', 'tables'])
          cpSync(join(root, 'services', service, folder), join(dir, 'services', service, folder), { recursive: true });
      }
      await pruneDeploy(dir, 'migrate', ...services.map((service) => join(dir, 'services', service, 'dist')));
      for (const [i, service] of services.entries()) {
        const output = execFileSync(process.execPath, [`services/${service}/dist/migrate.js`], {
          cwd: dir,
          env: { PATH: process.env.PATH, DATABASE_URL: urls[i] },
          encoding: 'utf8',
        });
        expect(output, service).toMatch(/idem_inbox/);
        expect(output, service).toContain('database up to date');
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
      await Promise.all(urls.map((url) => dropDatabase(url)));
    }
  }, 180_000);
});

describe('the production bundle', () => {
  it('is started by the image with a heap sized for a service and the instrumentation entry first', () => {
    expect(SERVICE_IMAGE_COMMAND).toEqual([
      'node',
      '--max-semi-space-size=8',
      '--heap-growing-percent=20',
      '--import',
      './dist/instrumentation.js',
      'dist/main.js',
    ]);
  });

  it("reads Prisma's query compiler from the .wasm beside it: no base64 copy of it imported or deployed", () => {
    const dir = deploys!.dirs.inventory;
    const files = readdirSync(dir, { recursive: true, encoding: 'utf8' });
    expect(files.filter((file) => file.includes('wasm-base64'))).toEqual([]);
    expect(files).toContain(join('dist', 'query_compiler_small_bg.postgresql.wasm'));
    expect(readFileSync(join(dir, 'dist/main.js'), 'utf8')).not.toContain('wasm-base64');
  });

  it('runs from a production-only deploy with plain node: migrates, serves health and metrics, consumes, stops on SIGTERM', async () => {
    const inventory = startBundle('inventory', port);
    try {
      expect(await inventory.healthy()).toEqual({ status: 'ok', checks: { database: 'ok', redis: 'ok' } });
      const publisher = createPublisher({ catalogue: shop, prefix });
      await publisher.publish([orderPlacedMessage({}, 'keyboard')]);
      await publisher.close();
      await waitFor(
        async () =>
          (await (await fetch(`${inventory.url}/metrics`)).text()).match(
            /idem_deliveries_total\{[^}]*outcome="processed"[^}]*\} 1/,
          ),
        { what: 'the delivery to be processed' },
      );
    } finally {
      await inventory.stop();
    }
  }, 120_000);

  it('exports HTTP, express, PostgreSQL, Redis and linked messaging spans over OTLP, and nothing but traces', async () => {
    const otlp = await startOtlpReceiver();
    const tracing = { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.endpoint, OTEL_BSP_SCHEDULE_DELAY: '200' };
    const JWT_SECRET = 'production-build-test-key-0123456789abcdef';
    const token = await mintCustomerToken({ secret: JWT_SECRET, ...DEFAULT_TOKEN_CLAIMS }, 'ada', {
      email: 'ada@example.com',
    });
    const ADMIN_TOKEN = 'production-build-operator-0123456789';
    const orders = startBundle('orders', port + 1, {
      ...tracing,
      OTEL_SERVICE_NAME: 'orders',
      JWT_SECRET,
      ADMIN_TOKEN,
    });
    const inventory = startBundle('inventory', port + 2, { ...tracing, OTEL_SERVICE_NAME: 'inventory' });
    try {
      await Promise.all([orders.healthy(), inventory.healthy()]);
      // No service seeds a catalog: the operator prices what is sold.
      const priced = await fetch(`${orders.url}/catalog/keyboard`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` },
        body: JSON.stringify({ name: 'Keyboard', unitPriceCents: 4999, currency: 'eur' }),
      });
      expect(priced.status).toBe(200);
      const res = await fetch(`${orders.url}/orders`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'idempotency-key': randomUUID(),
          authorization: `Bearer ${token}`,
        },
        body: JSON.stringify({ paymentMethod: 'pm_card_visa', lines: [{ sku: 'keyboard', quantity: 1 }] }),
      });
      expect(res.status).toBe(201);

      const of = (service: Service, match: (span: ReceivedSpan) => boolean) => () =>
        otlp.spans.find((s) => s.service === service && match(s));
      const server = await waitFor(
        of('orders', (s) => s.kind === 2 && s.attributes['http.route'] === '/orders'),
        { what: 'an HTTP server span with its route' },
      );
      await waitFor(
        of('orders', (s) => s.traceId === server.traceId && s.name.includes('request handler')),
        {
          what: 'an express span in the request',
        },
      );
      await waitFor(
        of('orders', (s) => s.traceId === server.traceId && isPostgres(s)),
        {
          what: "a PostgreSQL span under the request (the order's transaction)",
        },
      );
      const processed = await waitFor(
        of('inventory', (s) => s.name === 'process inventory.order-placed.v1'),
        {
          what: 'the consumer span',
        },
      );
      const send = await waitFor(
        of(
          'orders',
          (s) => s.name === 'send orders.order-placed.v1' && processed.links.some((l) => l.spanId === s.spanId),
        ),
        { what: 'the send span the consumer span links to' },
      );
      await waitFor(
        of('orders', (s) => s.traceId === send.traceId && isRedis(s)),
        {
          what: 'a Redis span under the publication',
        },
      );
      await waitFor(
        of('inventory', (s) => s.traceId === processed.traceId && isPostgres(s)),
        {
          what: 'a PostgreSQL span under the consumer span (the inbox transaction)',
        },
      );

      // A log line leads to its trace: the delivery's line carries its consumer span's ids...
      const delivery = inventory.lines().find((line) => line.msg === 'delivery processed');
      expect(delivery).toMatchObject({
        consumer: 'inventory.order-placed.v1',
        trace_id: processed.traceId,
        span_id: processed.spanId,
      });
      // ...and the access log has one line per request, in the request's trace, with no token,
      // email or address in it.
      const access = orders.lines().filter((line) => line.request !== undefined);
      expect(access.map((line) => line.request)).toEqual([
        {
          method: 'PUT',
          route: '/catalog/:sku',
          status: 200,
          durationMs: expect.any(Number),
          correlationId: expect.any(String),
        },
        {
          method: 'POST',
          route: '/orders',
          status: 201,
          durationMs: expect.any(Number),
          correlationId: expect.any(String),
        },
      ]);
      expect(access[1]).toMatchObject({ trace_id: server.traceId });
      const logged = JSON.stringify(access);
      for (const secret of [token, ADMIN_TOKEN, 'ada@example.com', '127.0.0.1', '::1'])
        expect(logged).not.toContain(secret);
    } finally {
      await orders.stop();
      await inventory.stop();
      await otlp.close();
    }
    // The customer's token reaches no span (the HTTP instrumentation records no Authorization).
    expect(JSON.stringify(otlp.spans)).not.toContain(token.split('.')[2]);
    // Metrics stay on Prometheus (/metrics), logs on stdout: Jaeger accepts only traces.
    expect(new Set(otlp.paths)).toEqual(new Set(['/v1/traces']));
  }, 120_000);
});

const isPostgres = (s: ReceivedSpan) =>
  s.attributes['db.system'] === 'postgresql' || s.attributes['db.system.name'] === 'postgresql';
const isRedis = (s: ReceivedSpan) =>
  s.attributes['db.system'] === 'redis' || s.attributes['db.system.name'] === 'redis';
