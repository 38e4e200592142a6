import { createTestDatabase, postgresServerUrl, uniqueName, type TestDatabase } from '@idem/testkit';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabaseIfMissing, dropDatabase } from './migrate.js';
import { fromNodePostgres } from './node-postgres.js';
import type { SqlClient } from './sql-client.js';
import { preparedStatementNames } from './prepared-statements.js';

const url = `${postgresServerUrl}/${uniqueName('idem_test_prepared')}`;
let pool: pg.Pool;
let prisma: TestDatabase;
beforeAll(async () => {
  await createDatabaseIfMissing(url);
  pool = new pg.Pool({ connectionString: url, max: 1 }); // one connection: what it prepared is what the next statement sees
  prisma = await createTestDatabase('prepared');
});
afterAll(async () => {
  await pool.end();
  await dropDatabase(url);
  await prisma?.drop();
});

/** What this session has prepared under a name, by text. */
const preparedOn = async (db: SqlClient) =>
  new Map(
    (await db.$queryRaw<{ name: string; statement: string }[]>`SELECT name, statement FROM pg_prepared_statements`).map(
      (row) => [row.statement, row.name],
    ),
  );

describe('prepared statements', () => {
  it('prepares each text once on a connection and runs it again by name, with its new parameters', async () => {
    const db = fromNodePostgres(pool);
    for (const n of [1, 2, 3])
      expect(await db.$queryRaw<{ m: number }[]>`SELECT ${n}::int + 1 AS m`).toEqual([{ m: n + 1 }]);
    await db.$transaction(async (tx) => void (await tx.$queryRaw`SELECT ${4}::int + 1 AS m`));
    const prepared = await preparedOn(db);
    expect(prepared.get('SELECT $1::int + 1 AS m')).toMatch(/^idem_\d+$/);
    expect([...prepared.values()].filter((name) => name === prepared.get('SELECT $1::int + 1 AS m'))).toHaveLength(1);
  });

  it('names at most `max` texts and sends the others unnamed, so endless texts cannot fill the server', async () => {
    const names = preparedStatementNames(2);
    expect([names('SELECT 1'), names('SELECT 2'), names('SELECT 1'), names('SELECT 3')]).toEqual([
      'idem_1',
      'idem_2',
      'idem_1',
      '',
    ]);
    const fresh = new pg.Pool({ connectionString: url, max: 1 });
    try {
      const db = fromNodePostgres(fresh, preparedStatementNames(2));
      for (const n of [1, 2, 3, 4]) await db.$queryRawUnsafe(`SELECT $1::int + ${n} AS m`, n);
      const prepared = await preparedOn(fromNodePostgres(fresh, () => ''));
      expect([...prepared.keys()].sort()).toEqual(['SELECT $1::int + 1 AS m', 'SELECT $1::int + 2 AS m']);
    } finally {
      await fresh.end();
    }
  });

  it("prepares Prisma's statements too, raw ones included (the services' and the tests' clients)", async () => {
    const prepared = await prisma.prisma.$transaction(async (tx) => {
      await tx.$queryRaw`SELECT ${1}::int AS one`;
      await tx.stockItem.findMany({ where: { sku: 'nobody' } });
      return preparedOn(tx);
    });
    expect(prepared.get('SELECT $1::int AS one')).toMatch(/^idem_\d+$/);
    expect([...prepared.keys()].some((text) => /FROM "public"\."stock_items"/.test(text))).toBe(true);
  });
});
