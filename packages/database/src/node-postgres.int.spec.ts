import { postgresServerUrl, uniqueName } from '@idem/testkit';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDatabaseIfMissing, dropDatabase } from './migrate.js';
import { fromNodePostgres, TransactionTimeoutError, type PgDatabase } from './node-postgres.js';

const url = `${postgresServerUrl}/${uniqueName('idem_test_node_postgres')}`;
let db: PgDatabase;
beforeAll(async () => {
  await createDatabaseIfMissing(url);
  db = fromNodePostgres(new pg.Pool({ connectionString: url, max: 1 }));
  await db.$executeRaw`CREATE TABLE things (id int PRIMARY KEY, at timestamptz NOT NULL)`;
});
afterAll(async () => {
  await db.$disconnect();
  await dropDatabase(url);
});
const terminateOtherConnections = async () => {
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await admin.query(
      'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()',
    );
  } finally {
    await admin.end();
  }
};
const count = async () => Number((await db.$queryRaw<{ n: string }[]>`SELECT count(*) AS n FROM things`)[0]!.n);

describe('fromNodePostgres', () => {
  it('sends tagged values as parameters, never as SQL text', async () => {
    const hostile = '1); DROP TABLE things; --';
    expect(await db.$queryRaw<{ v: string }[]>`SELECT ${hostile}::text AS v`).toEqual([{ v: hostile }]);
    expect(await db.$executeRaw`INSERT INTO things VALUES (${1}, ${new Date()}), (${2}, ${new Date()})`).toBe(2);
    await db.$executeRaw`DELETE FROM things`;
  });

  it('commits what the function wrote, and rolls all of it back when it throws', async () => {
    await db.$transaction(async (tx) => void (await tx.$executeRaw`INSERT INTO things VALUES (1, now())`));
    await expect(
      db.$transaction(async (tx) => {
        await tx.$executeRaw`INSERT INTO things VALUES (2, now())`;
        throw new Error('handler failed');
      }),
    ).rejects.toThrow('handler failed');
    expect(await count()).toBe(1);
    await db.$executeRaw`DELETE FROM things`;
  });

  it('rolls back a transaction that outlives its timeout, with an error classified like Prisma’s (P2028)', async () => {
    const late = db.$transaction(
      async (tx) => {
        await tx.$executeRaw`INSERT INTO things VALUES (3, now())`;
        await new Promise((resolve) => setTimeout(resolve, 300));
        await tx.$executeRaw`INSERT INTO things VALUES (4, now())`;
      },
      { timeout: 100 },
    );
    await expect(late).rejects.toBeInstanceOf(TransactionTimeoutError);
    await expect(late).rejects.toMatchObject({ code: 'P2028' });
    expect(await count()).toBe(0);
  });

  it('survives the server ending an idle connection: the pool drops it, the next query connects anew', async () => {
    await db.$queryRaw`SELECT 1`; // leaves one idle connection in the pool
    await terminateOtherConnections();
    await new Promise((resolve) => setTimeout(resolve, 100)); // the idle connection hears it
    expect(await db.$queryRaw<{ one: number }[]>`SELECT 1 AS one`).toEqual([{ one: 1 }]);
  });

  it('survives the server ending a connection inside a transaction while the function awaits something else', async () => {
    // The relay's case: a batch holds its connection while BullMQ answers, and PostgreSQL restarts.
    let resume!: () => void;
    const waiting = new Promise<void>((resolve) => (resume = resolve));
    const transaction = db.$transaction(
      async (tx) => {
        await tx.$executeRaw`INSERT INTO things VALUES (5, now())`;
        await waiting;
        await tx.$executeRaw`INSERT INTO things VALUES (6, now())`;
      },
      { timeout: 10_000 },
    );
    await new Promise((resolve) => setTimeout(resolve, 50)); // inside, between two statements
    await terminateOtherConnections();
    await new Promise((resolve) => setTimeout(resolve, 100)); // the connection hears it, with no query to fail
    resume();
    await expect(transaction).rejects.toThrow();
    expect(await count()).toBe(0); // nothing committed; the broken connection was not handed out again
  });

  it('gives up waiting for a connection after maxWait, and the pool still serves afterwards', async () => {
    let release!: () => void;
    const held = db.$transaction(() => new Promise<void>((resolve) => (release = resolve)), { timeout: 10_000 });
    await new Promise((resolve) => setTimeout(resolve, 50)); // the pool's one connection is taken
    await expect(db.$transaction(async () => 'never', { maxWait: 100 })).rejects.toBeInstanceOf(
      TransactionTimeoutError,
    );
    release();
    await held;
    expect(await db.$transaction(async (tx) => tx.$queryRaw<{ one: number }[]>`SELECT 1 AS one`)).toEqual([{ one: 1 }]);
  });
});
