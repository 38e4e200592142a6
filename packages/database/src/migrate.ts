import { createHash, randomUUID } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import type { TableSet } from './table-set.js';

/**
 * Prisma's own bookkeeping table, created exactly as `prisma migrate deploy` creates it, so a
 * user who has the schema engine can switch to `prisma migrate deploy/dev` on a database this
 * migrator prepared, without a reset.
 */
const CREATE_MIGRATIONS_TABLE = `
CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
    "id"                    VARCHAR(36) PRIMARY KEY NOT NULL,
    "checksum"              VARCHAR(64) NOT NULL,
    "finished_at"           TIMESTAMPTZ,
    "migration_name"        VARCHAR(255) NOT NULL,
    "logs"                  TEXT,
    "rolled_back_at"        TIMESTAMPTZ,
    "started_at"            TIMESTAMPTZ NOT NULL DEFAULT now(),
    "applied_steps_count"   INTEGER NOT NULL DEFAULT 0
)`;

/** One key for every idem migrator, so two starting instances never migrate at once. */
const MIGRATION_LOCK_KEY = 72_707_369;

/** A migration that cannot be applied safely: an applied file changed, one failed, or the folder or URL is wrong. */
export class MigrationError extends Error {
  constructor(
    readonly code:
      | 'checksum_mismatch'
      | 'failed_migration'
      | 'migration_failed'
      | 'missing_migrations'
      | 'duplicate_migration'
      | 'invalid_database_url',
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** Where the migrations are and which database they go to. */
export interface MigrateOptions {
  readonly databaseUrl: string;
  /** A Prisma migrations folder: `<timestamp>_<name>/migration.sql` + `migration_lock.toml`. */
  readonly migrationsDir: string;
  /** Tables of the packages the service uses (the inbox's, the outbox's), migrated beside its own. */
  readonly include?: readonly TableSet[];
  /**
   * The role the service runs as, when it is not the one that migrates (it should not be: a
   * service that can `DROP TABLE` will, one day). `databaseUrl`'s role owns the schema; this one
   * gets CONNECT, and SELECT/INSERT/UPDATE/DELETE on the tables and USAGE on the sequences, now
   * and for every table a later migration creates (default privileges), never DDL, and never the
   * migrator's own bookkeeping. @defaultValue none: the service runs as the migrating role
   */
  readonly runtimeRole?: string;
  readonly log?: (line: string) => void;
  /**
   * How long to keep trying while the server refuses connections (it is still starting, or not
   * reachable yet), with backoff; 0 tries once. @defaultValue 60 000
   */
  readonly connectTimeoutMs?: number;
}

/** One migration as read from the folder. */
export interface MigrationFile {
  readonly name: string;
  readonly sql: string;
  /** sha256 of the file, hex: the checksum Prisma records and compares. */
  readonly checksum: string;
}

/** The migrations of one folder (`<timestamp>_<name>/migration.sql`), as bytes, unsorted. */
function migrationsIn(migrationsDir: string): { name: string; bytes: Buffer }[] {
  if (!existsSync(migrationsDir)) {
    throw new MigrationError('missing_migrations', `no migrations folder at ${migrationsDir}`);
  }
  return readdirSync(migrationsDir, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(migrationsDir, entry.name, 'migration.sql')))
    .map((entry) => ({ name: entry.name, bytes: readFileSync(join(migrationsDir, entry.name, 'migration.sql')) }));
}

/** A service's migrations folder and the migrations of the packages it includes, in name order. */
export function readMigrations(migrationsDir: string, include: readonly TableSet[] = []): MigrationFile[] {
  const all = [migrationsDir, ...include.map((set) => join(set.directory, 'migrations'))]
    .flatMap(migrationsIn)
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const twice = all.find((migration, i) => all[i + 1]?.name === migration.name);
  if (twice) throw new MigrationError('duplicate_migration', `two migrations are named ${twice.name}`);
  return all.map(({ name, bytes }) => ({
    name,
    sql: bytes.toString('utf8'),
    checksum: createHash('sha256').update(bytes).digest('hex'),
  }));
}

/**
 * Applies pending migrations the way `prisma migrate deploy` would, without its engine:
 * creates the database if missing, holds an advisory lock, refuses edited or failed
 * migrations, and runs each new one in a transaction together with its bookkeeping row.
 * Idempotent: a second run applies nothing. Returns the names it applied.
 */
export async function migrate({
  databaseUrl,
  migrationsDir,
  include = [],
  runtimeRole,
  log = () => {},
  connectTimeoutMs = 60_000,
}: MigrateOptions): Promise<string[]> {
  assertDatabaseUrl(databaseUrl);
  const migrations = readMigrations(migrationsDir, include);
  // A migrate job often starts beside its server (compose, Kubernetes): wait for it, bounded.
  await untilConnected(databaseUrl, connectTimeoutMs, log);
  await createDatabaseIfMissing(databaseUrl, log);

  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    await client.query(CREATE_MIGRATIONS_TABLE);
    const { rows } = await client.query<{ migration_name: string; checksum: string; finished_at: Date | null }>(
      `SELECT migration_name, checksum, finished_at FROM "_prisma_migrations" WHERE rolled_back_at IS NULL`,
    );
    const recorded = new Map(rows.map((row) => [row.migration_name, row]));

    const applied: string[] = [];
    for (const migration of migrations) {
      const row = recorded.get(migration.name);
      if (row?.finished_at === null) {
        throw new MigrationError(
          'failed_migration',
          `migration ${migration.name} started but never finished; resolve it (prisma migrate resolve) before migrating again`,
        );
      }
      if (row && row.checksum !== migration.checksum) {
        throw new MigrationError(
          'checksum_mismatch',
          `migration ${migration.name} was edited after it was applied (checksum ${row.checksum} in the database, ` +
            `${migration.checksum} on disk); add a new migration instead of changing an applied one`,
        );
      }
      if (row) continue;
      await applyMigration(client, migration);
      log(`applied migration ${migration.name}`);
      applied.push(migration.name);
    }
    if (runtimeRole) {
      await grantRuntimeRole(client, runtimeRole);
      log(`${runtimeRole} may read and write the tables, and change none of them`);
    }
    return applied;
  } finally {
    await client.end();
  }
}

/**
 * What the role a service runs as may do in the database the migrating role owns: data, never
 * schema — but for the functions the migrations made for it, which change the schema only as
 * they are written to (the inbox's partitions: created ahead, dropped once expired). Run by the
 * owner after every migration (so it also repairs a grant someone revoked); the default
 * privileges cover tables that a migration applied by other means creates.
 */
async function grantRuntimeRole(client: pg.Client, role: string): Promise<void> {
  const runtime = pg.escapeIdentifier(role);
  const { rows } = await client.query<{ name: string }>('SELECT current_database() AS name');
  const database = pg.escapeIdentifier(rows[0]!.name);
  await client.query(`
    REVOKE ALL ON DATABASE ${database} FROM PUBLIC;
    GRANT CONNECT ON DATABASE ${database} TO ${runtime};
    REVOKE CREATE ON SCHEMA public FROM PUBLIC;
    GRANT USAGE ON SCHEMA public TO ${runtime};
    GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO ${runtime};
    GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA public TO ${runtime};
    GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO ${runtime};
    ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO ${runtime};
    ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO ${runtime};
    REVOKE ALL ON "_prisma_migrations" FROM ${runtime};`);
}

async function applyMigration(client: pg.Client, migration: MigrationFile): Promise<void> {
  try {
    await client.query('BEGIN');
    const id = randomUUID();
    await client.query(
      `INSERT INTO "_prisma_migrations" (id, checksum, migration_name, started_at, applied_steps_count)
       VALUES ($1, $2, $3, now(), 0)`,
      [id, migration.checksum, migration.name],
    );
    await client.query(migration.sql);
    await client.query(`UPDATE "_prisma_migrations" SET finished_at = now(), applied_steps_count = 1 WHERE id = $1`, [
      id,
    ]);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw new MigrationError(
      'migration_failed',
      `migration ${migration.name} failed and was rolled back: ${(error as Error).message}`,
      { cause: error },
    );
  }
}

/**
 * Refuses a database URL that does not parse, with a message that hides its password: Node's
 * own error would carry the whole URL (`input`) into the log.
 */
function assertDatabaseUrl(databaseUrl: string): void {
  if (URL.canParse(databaseUrl)) return;
  const redacted = databaseUrl.replace(/\/\/([^:/@]*):[^@]*@/, '//$1:***@');
  throw new MigrationError('invalid_database_url', `the database URL is not a valid URL: ${redacted}`);
}

/** Errors that mean the server is not (yet) accepting connections; anything else is final. */
const NOT_READY = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN', '57P03']);

/** Waits until the server accepts a connection, retrying with backoff for at most `timeoutMs`. */
async function untilConnected(databaseUrl: string, timeoutMs: number, log: (line: string) => void): Promise<void> {
  const url = new URL(databaseUrl);
  url.pathname = '/postgres';
  const deadline = Date.now() + timeoutMs;
  for (let delay = 250; ; delay = Math.min(delay * 2, 5_000)) {
    const client = new pg.Client({ connectionString: url.toString(), connectionTimeoutMillis: 5_000 });
    try {
      await client.connect();
      return;
    } catch (error) {
      const code = (error as { code?: string }).code ?? '';
      if (!NOT_READY.has(code) || Date.now() + delay > deadline) throw error;
      log(`PostgreSQL at ${url.host} is not accepting connections yet (${code}); retrying in ${delay} ms`);
      await new Promise((resolve) => setTimeout(resolve, delay));
    } finally {
      await client.end().catch(() => {});
    }
  }
}

/** Runs `fn` on the server's `postgres` database, with the name of the database `databaseUrl` names. */
async function withServer<T>(databaseUrl: string, fn: (admin: pg.Client, name: string) => Promise<T>): Promise<T> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.slice(1));
  url.pathname = '/postgres';
  const admin = new pg.Client({ connectionString: url.toString() });
  await admin.connect();
  try {
    return await fn(admin, name);
  } finally {
    await admin.end();
  }
}

/** Creates the database `databaseUrl` names, unless it exists. */
export function createDatabaseIfMissing(databaseUrl: string, log: (line: string) => void = () => {}): Promise<void> {
  return withServer(databaseUrl, async (admin, name) => {
    const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (rowCount) return;
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`).catch((error: { code?: string }) => {
      // Another instance created it between our check and our CREATE: that is the goal.
      // (42P04 when it had committed; 23505 on the catalog's index when both raced.)
      if (error.code !== '42P04' && error.code !== '23505') throw error;
    });
    log(`created database ${name}`);
  });
}

/** Drops a database (tests only), closing its connections first. */
export function dropDatabase(databaseUrl: string): Promise<void> {
  return withServer(databaseUrl, async (admin, name) => {
    await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
  });
}
