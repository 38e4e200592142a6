import { fileURLToPath } from 'node:url';
import { faultsFromEnv } from '@idem/faults';
import type { RunningService } from '@idem/runtime';
import { createMigratedDatabase, deleteQueues, uniqueName } from '@idem/testkit';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SERVICE_CONFIGS } from '../../repository/service-configs.js';
import { DEMO_CATALOG, seedDemoShop } from './demo-data.js';

/** Each API's operator token: the seed must send each service its own. */
const ADMIN_TOKENS = { orders: 'demo-data-test-orders-operator', inventory: 'demo-data-test-inventory-operator' };
const prefix = uniqueName('idem_test_demo');
type Start = (config: unknown, options: object) => Promise<RunningService>;
const running: Record<'orders' | 'inventory', RunningService> = {} as never;
const databases: { drop(): Promise<void> }[] = [];
const url = (service: keyof typeof running, path: string) => `http://127.0.0.1:${running[service].http.port}${path}`;
const operator = (service: keyof typeof running) => ({
  authorization: `Bearer ${ADMIN_TOKENS[service]}`,
  'content-type': 'application/json',
});

beforeAll(async () => {
  for (const service of ['orders', 'inventory'] as const) {
    const database = await createMigratedDatabase(
      service,
      fileURLToPath(new URL(`../../../services/${service}/prisma/migrations`, import.meta.url)),
      SERVICE_CONFIGS[service].tables,
    );
    databases.push(database);
    const module = (await import(`../../../services/${service}/src/service.ts`)) as Record<string, Start>;
    const start = module[`start${service[0]!.toUpperCase()}${service.slice(1)}`]!;
    running[service] = await start(
      SERVICE_CONFIGS[service].load({
        DATABASE_URL: database.url,
        IDEM_QUEUE_PREFIX: prefix,
        PORT: '0',
        LOG_LEVEL: 'silent',
        IDEM_ROLES: 'http',
        ADMIN_TOKEN: ADMIN_TOKENS[service],
        JWT_SECRET: 'demo-data-test-signing-key-0123456789abcdef',
      }),
      { faults: faultsFromEnv({}) },
    );
  }
});
afterAll(async () => {
  await Promise.all(Object.values(running).map((service) => service.stop()));
  await Promise.all(databases.map((database) => database.drop()));
  await deleteQueues(prefix);
});

describe('the demo shop', () => {
  it('is no service’s to seed: a service started on an empty database sells and stocks nothing', async () => {
    expect((await fetch(url('orders', '/catalog'))).ok).toBe(true);
    expect(((await (await fetch(url('orders', '/catalog'))).json()) as { items: unknown[] }).items).toEqual([]);
    expect((await fetch(url('inventory', '/stock/keyboard'))).status).toBe(404);
  });

  it('goes in through the operator API where a SKU has none, never over what an operator set', async () => {
    const put = (service: 'orders' | 'inventory', path: string, body: unknown) =>
      fetch(url(service, path), { method: 'PUT', headers: operator(service), body: JSON.stringify(body) });
    expect((await put('inventory', '/stock/keyboard', { available: 2 })).status).toBe(200);
    expect(
      (await put('orders', '/catalog/mouse', { name: 'Our own mouse', unitPriceCents: 1, currency: 'eur' })).status,
    ).toBe(200);

    const shop = {
      orders: url('orders', ''),
      inventory: url('inventory', ''),
      adminTokens: ADMIN_TOKENS,
    };
    const skus = DEMO_CATALOG.map((item) => item.sku);
    expect(await seedDemoShop(shop)).toEqual({
      catalog: skus.filter((sku) => sku !== 'mouse'),
      stock: skus.filter((sku) => sku !== 'keyboard'),
    });
    expect(await (await fetch(url('inventory', '/stock/keyboard'))).json()).toMatchObject({ available: 2 });
    expect(await (await fetch(url('orders', '/catalog/mouse'))).json()).toMatchObject({ unitPriceCents: 1 });
    expect(await seedDemoShop(shop)).toEqual({ catalog: [], stock: [] }); // once is all it does
  });
});
