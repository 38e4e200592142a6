/**
 * Each service's OpenAPI document, as it serves it at /openapi.json: a valid OpenAPI 3.1
 * document, listing exactly the routes the process has (read off its express router), each of
 * which answers, and the same as the copy committed under docs/openapi/ (refresh it with
 * `pnpm openapi:update`).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SERVICE_NAMES, type ServiceName } from '@idem/shop';
import { faultsFromEnv } from '@idem/faults';
import { DEFAULT_TOKEN_CLAIMS, mintCustomerToken } from '@idem/http';
import type { RunningService } from '@idem/runtime';
import { createMigratedDatabase, deleteQueues, uniqueName } from '@idem/testkit';
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { root } from './compose-file.js';
import { SERVICE_CONFIGS } from './service-configs.js';

const ADMIN_TOKEN = 'openapi-test-operator-token';
const JWT_SECRET = 'openapi-test-signing-key-0123456789abcdef';
const customerToken = mintCustomerToken({ secret: JWT_SECRET, ...DEFAULT_TOKEN_CLAIMS }, 'ada', {
  email: 'ada@example.com',
});
const prefix = uniqueName('idem_test_openapi');
type Service = ServiceName;
type Start = (config: unknown, options: object) => Promise<RunningService>;
/** Each service's composition root, `start<Name>` in its service.ts. */
const START = Object.fromEntries(
  await Promise.all(
    SERVICE_NAMES.map(async (service) => {
      const module = (await import(`../../services/${service}/src/service.ts`)) as Record<string, Start>;
      return [service, module[`start${service[0]!.toUpperCase()}${service.slice(1)}`]!];
    }),
  ),
) as Record<Service, Start>;
const running: Partial<Record<Service, RunningService>> = {};
const databases: { drop(): Promise<void> }[] = [];

beforeAll(async () => {
  for (const service of Object.keys(START) as Service[]) {
    const database = await createMigratedDatabase(
      service,
      fileURLToPath(new URL(`../../services/${service}/prisma/migrations`, import.meta.url)),
      SERVICE_CONFIGS[service].tables,
    );
    databases.push(database);
    const config = SERVICE_CONFIGS[service].load({
      DATABASE_URL: database.url,
      IDEM_QUEUE_PREFIX: prefix,
      PORT: '0',
      LOG_LEVEL: 'silent',
      IDEM_ROLES: 'http',
      ADMIN_TOKEN,
      JWT_SECRET,
      // Every operation is called with wrong credentials here, from one address, on purpose.
      RATE_LIMIT_FAILED_AUTHENTICATIONS_PER_ADDRESS: '100000',
    });
    // With the fault switches on, so their routes are there too.
    running[service] = await START[service](config, {
      faults: faultsFromEnv({ IDEM_FAULTS_ENABLED: '1' }),
    });
  }
});
afterAll(async () => {
  await Promise.all(Object.values(running).map((service) => service.stop()));
  await Promise.all(databases.map((database) => database.drop()));
  await deleteQueues(prefix);
});

/** A valid value of each path parameter. */
const samples: Record<string, string> = {
  id: '00000000-0000-4000-8000-000000000000',
  paymentAttemptId: '00000000-0000-4000-8000-000000000000',
  sku: 'keyboard',
};
const base = (service: Service) => `http://127.0.0.1:${running[service]!.http.port}`;
const documentOf = async (service: Service) =>
  (await (await fetch(`${base(service)}/openapi.json`)).json()) as {
    openapi: string;
    paths: Record<string, Record<string, unknown>>;
  };
/** `METHOD /path` of every route the process's express app has, in OpenAPI's path syntax. */
function routesOf(service: Service): string[] {
  // The server's request listener is the express app; express 5 keeps its routes in app.router.
  const app = running[service]!.http.server.listeners('request')[0] as unknown as {
    router: { stack: { route?: { path: string; methods: Record<string, boolean> } }[] };
  };
  const stack = app.router.stack;
  return stack
    .flatMap((layer) =>
      layer.route
        ? Object.keys(layer.route.methods).map(
            (m) => `${m.toUpperCase()} ${layer.route!.path.replace(/:(\w+)/g, '{$1}')}`,
          )
        : [],
    )
    .sort();
}
const operationsOf = (document: Awaited<ReturnType<typeof documentOf>>) =>
  Object.entries(document.paths)
    .flatMap(([path, methods]) => Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`))
    .sort();

describe.each(Object.keys(START) as Service[])('%s /openapi.json', (service) => {
  it('is a valid OpenAPI 3.1 document', async () => {
    const document = await documentOf(service);
    expect(document.openapi).toBe('3.1.0');
    const result = await new Validator().validate(document as unknown as Parameters<Validator['validate']>[0]);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it('lists exactly the routes the process has', async () => {
    const routes = routesOf(service).filter((r) => r !== 'GET /openapi.json');
    expect(operationsOf(await documentOf(service))).toEqual(routes);
    expect(routes.length).toBeGreaterThan(8);
  });

  it('describes the JSON body of every success answer (the tests check each answer against it)', async () => {
    const document = await documentOf(service);
    const NOT_JSON = ['get /metrics', 'get /problems/{type}'];
    const undescribed = Object.entries(document.paths).flatMap(([path, methods]) =>
      Object.entries(methods as Record<string, { responses: Record<string, { content?: object }> }>).flatMap(
        ([method, operation]) =>
          Object.entries(operation.responses)
            .filter(([status, response]) => /^2/.test(status) && !response.content)
            .filter(() => !NOT_JSON.includes(`${method} ${path}`))
            .map(([status]) => `${method.toUpperCase()} ${path} ${status}`),
      ),
    );
    expect(undescribed).toEqual([]);
  });

  it('answers a problem whose `type` resolves, on the service, to what it means', async () => {
    const refused = await fetch(`${base(service)}/health/live`, { method: 'PUT' });
    const problem = (await refused.json()) as { type: string; title: string };
    const page = await fetch(new URL(problem.type, base(service)));
    expect(page.status).toBe(200);
    expect(await page.text()).toContain(problem.title);
    expect((await fetch(`${base(service)}/problems/no-such-problem`)).status).toBe(404);
  });

  it('has a route behind every operation: none answers "no route"', async () => {
    for (const operation of operationsOf(await documentOf(service))) {
      const [method, path] = operation.split(' ') as [string, string];
      const url = base(service) + path.replace(/\{(\w+)\}/g, (_all, name: string) => samples[name] ?? 'x');
      const res = await fetch(url, {
        method,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        ...(method === 'GET' ? {} : { body: '{}' }),
      });
      const text = await res.text();
      expect(text, operation).not.toContain('no route for');
    }
  });

  it('refuses text PostgreSQL cannot store (NUL, a lone surrogate) with 400 naming the field, on every input of every operation', async () => {
    type Operation = {
      security?: Record<string, unknown>[];
      parameters?: { name: string; in: string }[];
      requestBody?: { content: Record<string, { schema: { properties?: Record<string, unknown> } }> };
    };
    const document = (await documentOf(service)) as unknown as { paths: Record<string, Record<string, Operation>> };
    let inputs = 0;
    for (const [path, methods] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        const parameters = operation.parameters ?? [];
        const properties = Object.keys(operation.requestBody?.content['application/json']?.schema.properties ?? {});
        const cases = [
          ...parameters
            .filter((p) => p.in === 'path' || p.in === 'query')
            .map((p) => ({ field: `${p.in}.${p.name}`, in: p.in, name: p.name, text: 'x\u0000y' })),
          ...properties.flatMap((name) =>
            ['x\u0000y', 'x\ud800y'].map((text) => ({ field: `body.${name}`, in: 'body', name, text })),
          ),
        ];
        for (const input of cases) {
          inputs++;
          const url = new URL(
            base(service) +
              path.replace(/\{(\w+)\}/g, (_all, name: string) =>
                input.in === 'path' && name === input.name ? encodeURIComponent(input.text) : (samples[name] ?? 'x'),
              ),
          );
          if (input.in === 'query') url.searchParams.set(input.name, input.text);
          // As the caller the operation is for: a customer where only a customer may call it.
          const customerOnly = operation.security?.every((s) => Object.keys(s).includes('customer'));
          const res = await fetch(url, {
            method: method.toUpperCase(),
            headers: {
              authorization: `Bearer ${customerOnly ? await customerToken : ADMIN_TOKEN}`,
              'content-type': 'application/json',
            },
            ...(method === 'get'
              ? {}
              : { body: JSON.stringify(input.in === 'body' ? { [input.name]: input.text } : {}) }),
          });
          const what = `${method.toUpperCase()} ${path} ${input.field}=${JSON.stringify(input.text)}`;
          expect(res.status, what).toBe(400);
          const problem = (await res.json()) as { errors?: { field: string }[] };
          expect(
            problem.errors?.map((e) => e.field),
            what,
          ).toContain(input.field);
        }
      }
    }
    expect(inputs).toBeGreaterThan(0);
  });

  it('records one audit event for every call of every operator operation, refused ones too (counted on /metrics)', async () => {
    type Operation = { security?: Record<string, unknown>[] };
    const document = (await documentOf(service)) as unknown as { paths: Record<string, Record<string, Operation>> };
    const counted = async () => {
      const text = await (await fetch(`${base(service)}/metrics`)).text();
      return new Map(
        [...text.matchAll(/^idem_operator_actions_total\{([^}]*)\} (\d+)/gm)].map(([, labels, value]) => {
          const of = (name: string) => new RegExp(`${name}="([^"]*)"`).exec(labels!)?.[1];
          return [`${of('action')} ${of('outcome')}`, Number(value)];
        }),
      );
    };
    let operations = 0;
    for (const [path, methods] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        const operatorOnly = operation.security?.every((s) => Object.keys(s).includes('operator'));
        if (!operatorOnly) continue;
        operations++;
        const action = `${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`;
        const url = base(service) + path.replace(/\{(\w+)\}/g, (_all, name: string) => samples[name] ?? 'x');
        for (const [token, outcome] of [
          ['not-the-operator-token', 'refused'],
          [ADMIN_TOKEN, undefined],
        ] as const) {
          const before = await counted();
          const res = await fetch(url, {
            method: method.toUpperCase(),
            headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
            ...(method === 'get' ? {} : { body: '{}' }),
          });
          await res.text();
          await new Promise((resolve) => setTimeout(resolve, 20));
          const after = await counted();
          const grew = [...after].filter(
            ([key, value]) => key.startsWith(`${action} `) && value > (before.get(key) ?? 0),
          );
          expect(
            grew.map(([key, value]) => [key, value - (before.get(key) ?? 0)]),
            action,
          ).toEqual([[`${action} ${outcome ?? grew[0]?.[0].split(' ').at(-1)}`, 1]]);
        }
      }
    }
    expect(operations).toBeGreaterThan(0);
  });

  it('is the copy committed under docs/openapi/', async () => {
    const file = join(root, 'docs/openapi', `${service}.json`);
    const served = `${JSON.stringify(await documentOf(service), null, 2)}\n`;
    if (process.env.UPDATE_OPENAPI === '1') writeFileSync(file, served);
    expect(readFileSync(file, 'utf8')).toBe(served);
  });
});
