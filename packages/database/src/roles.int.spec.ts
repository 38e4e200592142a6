/**
 * A service runs with the rights it needs, not as its database's owner: the migrating role owns
 * the schema, the runtime role reads and writes its tables and nothing more. Real PostgreSQL;
 * the roles and databases are the test's own, dropped at the end.
 */
import { migrationsFolder } from '@idem/testkit';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from './migrate.js';

const server = process.env.TEST_POSTGRES_URL ?? 'postgresql://postgres@127.0.0.1:5432';
const suffix = `${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 6)}`;
/** Two services' databases, each owned by its migrating role, each with a runtime role. */
const services = ['shop', 'other'].map((name) => ({
  database: `idem_test_roles_${name}_${suffix}`,
  owner: `idem_test_${name}_owner_${suffix}`,
  runtime: `idem_test_${name}_runtime_${suffix}`,
}));
const [shop, other] = services as [(typeof services)[0], (typeof services)[0]];
const PASSWORD = 'roles-test-password';
const urlOf = (role: string, database: string) => {
  const url = new URL(server);
  url.username = role;
  url.password = PASSWORD;
  url.pathname = `/${database}`;
  return url.toString();
};

async function as<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}
const admin = <T>(work: (client: pg.Client) => Promise<T>) => as(`${server}/postgres`, work);
/** The SQLSTATE a statement fails with, or 'ok'. */
const outcome = (url: string, sql: string) =>
  as(url, (client) => client.query(sql)).then(
    () => 'ok',
    (error: { code?: string }) => error.code,
  );

const FIRST = { '20260101000000_items': 'CREATE TABLE "items" ("id" SERIAL PRIMARY KEY, "name" TEXT NOT NULL);\n' };

beforeAll(async () => {
  // What infra/postgres/init.sh, CloudNativePG's managed roles and the native run do: the roles,
  // and a database owned by the migrating role. The grants are migrate's.
  await admin(async (client) => {
    for (const { database, owner, runtime } of services) {
      await client.query(`CREATE ROLE ${owner} LOGIN PASSWORD '${PASSWORD}'`);
      await client.query(`CREATE ROLE ${runtime} LOGIN PASSWORD '${PASSWORD}'`);
      await client.query(`CREATE DATABASE ${database} OWNER ${owner}`);
    }
  });
  for (const { database, owner, runtime } of services) {
    await migrate({
      databaseUrl: urlOf(owner, database),
      migrationsDir: migrationsFolder(FIRST),
      runtimeRole: runtime,
    });
  }
});
afterAll(async () => {
  await admin(async (client) => {
    for (const { database, owner, runtime } of services) {
      await client.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      for (const role of [runtime, owner]) await client.query(`DROP ROLE IF EXISTS ${role}`);
    }
  });
});

describe('the runtime role', () => {
  const runtimeUrl = () => urlOf(shop.runtime, shop.database);

  it('reads, writes and deletes rows of its tables, sequences included', async () => {
    const rows = await as(runtimeUrl(), async (client) => {
      await client.query(`INSERT INTO items (name) VALUES ('keyboard'), ('mouse')`);
      await client.query(`UPDATE items SET name = 'cable' WHERE name = 'mouse'`);
      await client.query(`DELETE FROM items WHERE name = 'keyboard'`);
      return (await client.query<{ name: string }>('SELECT name FROM items')).rows;
    });
    expect(rows).toEqual([{ name: 'cable' }]);
  });

  it('is refused every change of the schema (42501)', async () => {
    for (const ddl of [
      'CREATE TABLE sneaky (id int)',
      'DROP TABLE items',
      'ALTER TABLE items ADD COLUMN price int',
      'TRUNCATE items',
      'CREATE INDEX ON items (name)',
    ]) {
      expect(await outcome(runtimeUrl(), ddl), ddl).toBe('42501');
    }
  });

  it("is refused the migrator's bookkeeping and another service's database", async () => {
    expect(await outcome(runtimeUrl(), 'SELECT * FROM "_prisma_migrations"')).toBe('42501');
    expect(await outcome(runtimeUrl(), `DELETE FROM "_prisma_migrations"`)).toBe('42501');
    expect(await outcome(urlOf(shop.runtime, other.database), 'SELECT 1')).toBe('42501');
    expect(await outcome(urlOf(other.runtime, shop.database), 'SELECT 1')).toBe('42501');
  });

  it('uses the tables of a migration applied later without a manual grant', async () => {
    const later = {
      ...FIRST,
      '20260102000000_prices': 'CREATE TABLE "prices" ("sku" TEXT PRIMARY KEY, "cents" BIGSERIAL);\n',
    };
    expect(
      await migrate({ databaseUrl: urlOf(shop.owner, shop.database), migrationsDir: migrationsFolder(later) }),
    ).toEqual(['20260102000000_prices']);
    expect(await outcome(runtimeUrl(), `INSERT INTO prices (sku) VALUES ('keyboard')`)).toBe('ok');
    expect(await outcome(runtimeUrl(), 'DROP TABLE prices')).toBe('42501');
  });
});
