import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { asRole, provisionConsoleRoles, provisionDatabase } from './databases.js';

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

/** The console's roles, under names of this test's own (the native run's are `console` and `lessons`). */
const consoleRoles = {
  reader: `idem_test_console_${Date.now().toString(36)}`,
  scratch: `idem_test_lessons_${Date.now().toString(36)}`,
};
const scratchDatabase = `${consoleRoles.scratch}_own`;

afterAll(async () => {
  await query(`${server}/postgres`, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await query(`${server}/postgres`, `DROP DATABASE IF EXISTS ${scratchDatabase} WITH (FORCE)`);
  for (const role of Object.values(consoleRoles)) await query(`${server}/postgres`, `DROP ROLE IF EXISTS ${role}`);
});

/** The SQLSTATE a statement fails with as `url`'s role, or 'ok'. */
const outcome = (url: string, sql: string) =>
  query(url, sql).then(
    () => 'ok',
    (error: { code?: string }) => error.code,
  );

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

describe('provisionConsoleRoles', () => {
  it("lets the console read a service's database and change nothing, and its lessons make databases of their own and reach no other", async () => {
    // The service's database as migrate leaves it: no CONNECT for anyone it did not grant.
    await query(url, 'CREATE TABLE IF NOT EXISTS legacy (id serial PRIMARY KEY, note text)');
    await query(url, `REVOKE ALL ON DATABASE ${database} FROM PUBLIC`);
    await provisionConsoleRoles(server, [url], consoleRoles);
    await provisionConsoleRoles(server, [url], consoleRoles); // idempotent
    const reader = asRole(url, consoleRoles.reader);
    expect(await outcome(reader, 'SELECT count(*) FROM legacy')).toBe('ok');
    expect(await outcome(reader, "INSERT INTO legacy (note) VALUES ('no')")).toBe('42501');
    expect(await outcome(reader, 'CREATE TABLE mine (id int)')).toBe('42501');
    expect(await outcome(asRole(`${server}/postgres`, consoleRoles.reader), `CREATE DATABASE ${scratchDatabase}`)).toBe(
      '42501',
    );
    const scratch = asRole(`${server}/postgres`, consoleRoles.scratch);
    expect(await outcome(asRole(url, consoleRoles.scratch), 'SELECT 1')).toBe('42501');
    expect(await outcome(scratch, `CREATE DATABASE ${scratchDatabase}`)).toBe('ok');
    expect(await outcome(scratch, `DROP DATABASE ${scratchDatabase}`)).toBe('ok');
    const roles = await query<{ rolname: string; rolsuper: boolean; rolcreatedb: boolean; rolcreaterole: boolean }>(
      `${server}/postgres`,
      'SELECT rolname, rolsuper, rolcreatedb, rolcreaterole FROM pg_roles WHERE rolname = ANY($1) ORDER BY rolname',
      [Object.values(consoleRoles)],
    );
    expect(roles).toEqual([
      { rolname: consoleRoles.reader, rolsuper: false, rolcreatedb: false, rolcreaterole: false },
      { rolname: consoleRoles.scratch, rolsuper: false, rolcreatedb: true, rolcreaterole: false },
    ]);
  });
});
