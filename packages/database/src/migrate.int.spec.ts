import { inspect } from 'node:util';
import pg from 'pg';
import { createPostgresServer, migrationsFolder } from '@idem/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { dropDatabase, migrate, readMigrations } from './migrate.js';

const server = process.env.TEST_POSTGRES_URL ?? 'postgresql://postgres@127.0.0.1:5432';
const databases: string[] = [];

function freshDatabaseUrl(): string {
  const url = `${server}/idem_test_migrate_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
  databases.push(url);
  return url;
}

async function query<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql)).rows;
  } finally {
    await client.end();
  }
}

afterAll(async () => {
  await Promise.all(databases.map(dropDatabase));
});

describe('migrate', () => {
  const files = {
    '20260101000000_first': 'CREATE TABLE "a" ("id" INTEGER NOT NULL);\n',
    '20260102000000_second': 'ALTER TABLE "a" ADD COLUMN "b" TEXT;\n',
  };

  it('creates the database, applies every migration in order and records them as prisma migrate deploy does', async () => {
    const url = freshDatabaseUrl();
    const dir = migrationsFolder(files);

    expect(await migrate({ databaseUrl: url, migrationsDir: dir })).toEqual(Object.keys(files));

    const rows = await query<{ migration_name: string; checksum: string; applied_steps_count: number }>(
      url,
      `SELECT migration_name, checksum, applied_steps_count, finished_at IS NOT NULL AS finished
         FROM "_prisma_migrations" ORDER BY migration_name`,
    );
    expect(rows).toEqual(
      readMigrations(dir).map((m) => ({
        migration_name: m.name,
        checksum: m.checksum,
        applied_steps_count: 1,
        finished: true,
      })),
    );
    expect(rows[0]!.checksum).toMatch(/^[0-9a-f]{64}$/);
  });

  it('is idempotent: a second run applies nothing', async () => {
    const url = freshDatabaseUrl();
    const dir = migrationsFolder(files);
    await migrate({ databaseUrl: url, migrationsDir: dir });
    expect(await migrate({ databaseUrl: url, migrationsDir: dir })).toEqual([]);
  });

  it('lets two instances start at once without both applying a migration', async () => {
    const url = freshDatabaseUrl();
    const dir = migrationsFolder(files);
    const [one, two] = await Promise.all([
      migrate({ databaseUrl: url, migrationsDir: dir }),
      migrate({ databaseUrl: url, migrationsDir: dir }),
    ]);
    expect([...one, ...two].sort()).toEqual(Object.keys(files));
  });

  it('refuses a migration edited after it was applied, naming it', async () => {
    const url = freshDatabaseUrl();
    await migrate({ databaseUrl: url, migrationsDir: migrationsFolder(files) });
    const edited = migrationsFolder({ ...files, '20260101000000_first': 'CREATE TABLE "a" ("id" BIGINT NOT NULL);\n' });
    await expect(migrate({ databaseUrl: url, migrationsDir: edited })).rejects.toMatchObject({
      code: 'checksum_mismatch',
      message: expect.stringContaining('20260101000000_first was edited'),
    });
  });

  it('rolls back a failing migration entirely and reports it', async () => {
    const url = freshDatabaseUrl();
    const dir = migrationsFolder({ '20260101000000_bad': 'CREATE TABLE "x" ("id" INTEGER);\nSELECT nonsense;\n' });
    await expect(migrate({ databaseUrl: url, migrationsDir: dir })).rejects.toMatchObject({ code: 'migration_failed' });
    expect(await query(url, `SELECT 1 FROM "_prisma_migrations"`)).toEqual([]);
    expect(await query(url, `SELECT 1 FROM pg_tables WHERE tablename = 'x'`)).toEqual([]);
  });

  it('waits for a server that starts listening only after it was started, then migrates', async () => {
    // What a compose migrate job meets: the server's port opens a few seconds later.
    const server = await createPostgresServer({ port: 15_433 });
    const dir = migrationsFolder(files);
    const lines: string[] = [];
    try {
      const migrating = migrate({
        databaseUrl: `${server.url}/late`,
        migrationsDir: dir,
        log: (line) => lines.push(line),
      });
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      await server.start();
      expect(await migrating).toEqual(Object.keys(files));
      expect(lines.some((line) => line.includes('not accepting connections yet (ECONNREFUSED)'))).toBe(true);
    } finally {
      await server.destroy();
    }
  });

  it('gives up on a server that never answers once its connect timeout has passed', async () => {
    const started = Date.now();
    await expect(
      migrate({
        databaseUrl: 'postgresql://postgres@127.0.0.1:1/never',
        migrationsDir: migrationsFolder(files),
        connectTimeoutMs: 1_000,
      }),
    ).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('refuses a database URL that does not parse without printing its password', async () => {
    const refused = migrate({
      databaseUrl: 'postgresql://orders:s3cret-pw@db host:5432/orders',
      migrationsDir: migrationsFolder(files),
    });
    await expect(refused).rejects.toMatchObject({ code: 'invalid_database_url' });
    const error = await refused.catch((e: unknown) => e);
    expect(inspect(error, { depth: 5 })).not.toContain('s3cret-pw');
    expect((error as Error).message).toContain('postgresql://orders:***@db host:5432/orders');
  });
});
