import { postgresServerUrl, uniqueName } from '@idem/testkit';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { afterCommit, clientOf, runningAfterCommit } from './after-commit.js';
import { createDatabaseIfMissing, dropDatabase } from './migrate.js';
import { fromNodePostgres, type PgDatabase } from './node-postgres.js';

const url = `${postgresServerUrl}/${uniqueName('idem_test_after_commit')}`;
let plain: PgDatabase;
let db: PgDatabase;
beforeAll(async () => {
  await createDatabaseIfMissing(url);
  plain = fromNodePostgres(new pg.Pool({ connectionString: url, max: 4 }));
  db = runningAfterCommit(plain);
  await plain.$executeRaw`CREATE TABLE items (id int PRIMARY KEY)`;
});
afterAll(async () => {
  await plain.$disconnect();
  await dropDatabase(url);
});
beforeEach(async () => {
  await plain.$executeRaw`TRUNCATE items`;
});

/** How many rows another connection sees now. */
const committedRows = async () => (await plain.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM items`)[0]!.n;

describe('runningAfterCommit', () => {
  it('runs the work once, after the commit: what it looks for is already there for everyone', async () => {
    const seen: number[] = [];
    const result = await db.$transaction(async (tx) => {
      await tx.$executeRaw`INSERT INTO items VALUES (1)`;
      expect(afterCommit(tx, () => void committedRows().then((n) => seen.push(n)))).toBe(true);
      expect(clientOf(tx)).toBe(db);
      expect(seen).toEqual([]); // not yet: the transaction is still open
      return 'done';
    });
    expect(result).toBe('done');
    await expect.poll(() => seen).toEqual([1]);
  });

  it('runs nothing after a rollback, and the error is the transaction’s', async () => {
    let ran = 0;
    const failed = db.$transaction(async (tx) => {
      await tx.$executeRaw`INSERT INTO items VALUES (1)`;
      afterCommit(tx, () => void ran++);
      throw new Error('refused');
    });
    await expect(failed).rejects.toThrow('refused');
    // A statement failing in the database rolls back too.
    const broken = db.$transaction(async (tx) => {
      afterCommit(tx, () => void ran++);
      await tx.$executeRaw`INSERT INTO items VALUES (2), (2)`;
    });
    await expect(broken).rejects.toThrow();
    expect(ran).toBe(0);
    expect(await committedRows()).toBe(0);
  });

  it('keeps each transaction’s work to itself, side by side', async () => {
    const ran: string[] = [];
    const run = (name: string, fail: boolean) =>
      db.$transaction(async (tx) => {
        afterCommit(tx, () => void ran.push(name));
        await new Promise((resolve) => setTimeout(resolve, 20));
        if (fail) throw new Error(`${name} refused`);
      });
    const outcomes = await Promise.allSettled([run('a', false), run('b', true), run('c', false)]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(ran.sort()).toEqual(['a', 'c']);
  });

  it('says no in a transaction of any other client, and outside one, and runs nothing there', async () => {
    let ran = 0;
    await plain.$transaction(async (tx) => {
      expect(afterCommit(tx, () => void ran++)).toBe(false);
      expect(clientOf(tx)).toBeUndefined();
    });
    expect(afterCommit(db, () => void ran++)).toBe(false);
    expect(ran).toBe(0);
  });

  it('a failing piece of work is reported as a warning; the others still run and the caller has its result', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.message);
    process.on('warning', onWarning);
    try {
      let ran = 0;
      const result = await db.$transaction(async (tx) => {
        afterCommit(tx, () => {
          throw new Error('broker down');
        });
        afterCommit(tx, () => void ran++);
        return 42;
      });
      expect(result).toBe(42);
      expect(ran).toBe(1);
      await expect.poll(() => warnings).toEqual(['work after commit failed: broker down']);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('is otherwise the client it wraps: its methods, bound to it, the same function each time', async () => {
    expect(db.$queryRaw).toBe(db.$queryRaw);
    const query = db.$queryRaw;
    expect(await query<{ one: number }[]>`SELECT 1 AS one`).toEqual([{ one: 1 }]);
  });
});
