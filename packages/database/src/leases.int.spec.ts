import { postgresServerUrl, uniqueName } from '@idem/testkit';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { claimLeased, type LeaseClaim } from './leases.js';
import { createDatabaseIfMissing, dropDatabase } from './migrate.js';
import { fromNodePostgres, type PgDatabase } from './node-postgres.js';

const url = `${postgresServerUrl}/${uniqueName('idem_test_leases')}`;
let db: PgDatabase;
beforeAll(async () => {
  await createDatabaseIfMissing(url);
  db = fromNodePostgres(new pg.Pool({ connectionString: url, max: 4 }));
  await db.$executeRaw`CREATE TABLE work_items (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), status text NOT NULL,
    next_attempt_at timestamptz NOT NULL, attempts int NOT NULL DEFAULT 0, lease_owner text, lease_expires_at timestamptz)`;
});
afterAll(async () => {
  await db.$disconnect();
  await dropDatabase(url);
});
beforeEach(async () => {
  await db.$executeRaw`TRUNCATE work_items`;
  await db.$executeRaw`INSERT INTO work_items (status, next_attempt_at)
    SELECT CASE WHEN i % 10 = 0 THEN 'done' ELSE 'pending' END, now() - i * interval '1 second' FROM generate_series(1, 100) AS i`;
});

const t0 = new Date(Date.now() + 1000);
interface WorkItem {
  id: string;
  status: string;
  nextAttemptAt: Date;
  attempts: number;
  leaseOwner: string | null;
  leaseExpiresAt: Date | null;
}
const claimRows = (owner: string, overrides: Partial<LeaseClaim> = {}) =>
  claimLeased<WorkItem>(db, {
    table: 'work_items',
    statuses: ['pending'],
    counter: 'attempts',
    owner,
    leaseMs: 60_000,
    batchSize: 10,
    now: t0,
    ...overrides,
  });
const claim = async (owner: string, overrides: Partial<LeaseClaim> = {}) =>
  (await claimRows(owner, overrides)).map((row) => row.id);

describe('claimLeased', () => {
  it('gives each due item to one of many workers claiming at once, oldest first, counting each claim', async () => {
    const claims = await Promise.all(Array.from({ length: 12 }, (_, i) => claim(`worker-${i}`)));
    const ids = claims.flat();
    expect(ids).toHaveLength(90); // the 90 pending ones, none twice, the 'done' ones never
    expect(new Set(ids).size).toBe(90);
    const rows = await db.$queryRaw<{ attempts: number; owned: boolean }[]>`
      SELECT attempts, lease_owner IS NOT NULL AS owned FROM work_items WHERE status = 'pending'`;
    expect(rows.every((r) => r.attempts === 1 && r.owned)).toBe(true);
    const dueOf = async (id: string) =>
      (await db.$queryRaw<{ at: Date }[]>`SELECT next_attempt_at AS at FROM work_items WHERE id = ${id}::uuid`)[0]!.at;
    for (const batch of claims.filter((c) => c.length > 1)) {
      const dues = await Promise.all(batch.map(dueOf));
      expect(dues).toEqual([...dues].sort((a, b) => a.getTime() - b.getTime()));
    }
  });

  it('returns the claimed rows whole, as the claim left them, under camelCase names', async () => {
    const [row] = await claimRows('worker-a', { batchSize: 1 });
    expect(row).toEqual({
      id: expect.any(String),
      status: 'pending',
      nextAttemptAt: expect.any(Date),
      attempts: 1,
      leaseOwner: 'worker-a',
      leaseExpiresAt: new Date(t0.getTime() + 60_000),
    });
  });

  it('takes an item back only once its lease has expired', async () => {
    const first = await claim('a', { batchSize: 100 });
    expect(await claim('b', { now: new Date(t0.getTime() + 59_000) })).toEqual([]);
    const again = await claim('b', { now: new Date(t0.getTime() + 61_000), batchSize: 100 });
    expect(new Set(again)).toEqual(new Set(first));
  });

  it('refuses a table or column name that is not a plain identifier', async () => {
    await expect(claim('a', { table: 'work_items; DROP TABLE work_items' })).rejects.toThrow('not an identifier');
  });
});
