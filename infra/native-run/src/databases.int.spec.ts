import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { asRole, provisionDatabase } from './databases.js';

const server = process.env.TEST_POSTGRES_URL ?? 'postgresql://postgres@127.0.0.1:5432';
const database = `idem_test_provision_${Date.now().toString(36)}`;
const url = `${server}/${database}`;
// The native run's own role names, shared by every system on the server: created if missing, left in place.
const SERVICE = 'inventory';

async function query<T extends pg.QueryResultRow>(connectionString: string, sql: string, params: unknown[] = []) {
  const client = new pg.Client({ connectionString });
  await client.connect();
  try {
    return (await client.query<T>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

afterAll(async () => {
  await query(`${server}/postgres`, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
});

describe('provisionDatabase', () => {
  it("hands a database from before the roles were split to the service's migrating role, tables and all, twice over", async () => {
    await query(`${server}/postgres`, `CREATE DATABASE ${database}`);
    await query(url, 'CREATE TABLE legacy (id serial PRIMARY KEY, note text)');
    await provisionDatabase(url, SERVICE);
    await provisionDatabase(url, SERVICE); // idempotent
    const owners = await query<{ name: string; owner: string }>(
      url,
      `SELECT c.relname AS name, pg_get_userbyid(c.relowner) AS owner FROM pg_class c
        WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'S') ORDER BY 1`,
    );
    expect(owners).toEqual([
      { name: 'legacy', owner: SERVICE },
      { name: 'legacy_id_seq', owner: SERVICE },
    ]);
    const [db] = await query<{ owner: string }>(
      `${server}/postgres`,
      `SELECT pg_get_userbyid(datdba) AS owner FROM pg_database WHERE datname = $1`,
      [database],
    );
    expect(db).toEqual({ owner: SERVICE });
    // The owner may now change it, as its migrations will.
    expect(await query(asRole(url, SERVICE), 'ALTER TABLE legacy ADD COLUMN extra int')).toEqual([]);
  });
});
