/**
 * Test support for idem's integration tiers: a fresh, migrated PostgreSQL database and fresh
 * queue names per test file, against the real servers on localhost.
 */
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { PrismaPg } from '@prisma/adapter-pg';
import { Redis } from 'ioredis';
import pg from 'pg';
import { newMessageId, serviceOf } from '@idem/contracts';
import { exampleBodies, type Envelope, type EventBody, type EventType } from '@idem/shop';
import {
  dropDatabase,
  findSchemaDrift,
  migrate,
  packageModels,
  preparingStatements,
  type SqlClient,
  type TableSet,
} from '@idem/database';
import { PrismaClient } from './generated/prisma/client.js';
import { PACKAGE_TABLES } from './tables.js';

const run = promisify(execFile);

/** The packages' tables the testkit's stand-in service has (all of them), for `migrate({ include })`. */
export const testkitTables = PACKAGE_TABLES;

export { PrismaClient };
export type { Prisma } from './generated/prisma/client.js';

/** The testkit's own schema and migrations: a tiny business, beside the packages' tables (src/tables.ts). */
export const testkitPrismaDir = join(dirname(fileURLToPath(import.meta.url)), '../prisma');

export const postgresServerUrl = process.env.TEST_POSTGRES_URL ?? 'postgresql://postgres@127.0.0.1:5432';
export const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
/** The machine's RabbitMQ as its administrator (`guest` on `/`, loopback only): tests name it, the transport never assumes it. */
export const rabbitmqUrl = process.env.RABBITMQ_URL ?? 'amqp://guest:guest@127.0.0.1:5672';

/** A name no other test file or run will use: `<label>_<time>_<random>`. */
export function uniqueName(label: string): string {
  return `${label}_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;
}

export interface TestDatabase {
  readonly url: string;
  readonly prisma: PrismaClient;
  /** Another client on the same database, as a second service instance would have. */
  connect(): PrismaClient;
  drop(): Promise<void>;
}

/** Creates a fresh database and applies `migrationsDir` to it: one per test file. */
export async function createMigratedDatabase(label: string, migrationsDir: string, include: readonly TableSet[] = []) {
  const url = testDatabaseUrl(label);
  await migrateForTests(url, migrationsDir, include);
  return { url, drop: () => dropDatabase(url) };
}

/** Migrates as the service's migrator does, then makes the inbox's partitions ahead. */
async function migrateForTests(url: string, migrationsDir: string, include: readonly TableSet[]): Promise<void> {
  await migrate({ databaseUrl: url, migrationsDir, include });
  await inboxPartitionsAhead(url);
}

/**
 * Where the database has the inbox's tables, the partitions of processed_messages for today and
 * tomorrow (UTC days), as a running service's retention makes them ahead: a test's records then
 * sit in range partitions as a service's do, not all in the DEFAULT one (@idem/inbox, partitions.ts).
 */
async function inboxPartitionsAhead(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`
      SELECT idem_inbox_add_partition(day, day + interval '1 day')
        FROM generate_series(date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',
                             date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + interval '1 day',
                             interval '1 day') AS day
       WHERE to_regproc('idem_inbox_add_partition') IS NOT NULL`);
  } finally {
    await client.end();
  }
}

/**
 * The database of a service under test, for one test file: created and migrated before its tests
 * as the service's migrator does it (its `prisma/migrations` under `root`, and the packages'
 * tables it includes), disconnected and dropped after them. `db` is the service's own client
 * (`connect`), usable from the first test on: it connects on its first query. `empty()` deletes
 * every row of every table but those it is told to `keep` (a fresh start, in a `beforeEach`).
 * `hooks` are the test runner's (vitest's `beforeAll` and `afterAll`): the testkit imports no
 * test runner, since the console's lessons run in production images.
 */
export function serviceDatabase<
  Client extends SqlClient & { $disconnect(): Promise<void>; $executeRawUnsafe(query: string): PromiseLike<number> },
>(
  service: string,
  {
    root,
    tables,
    connect,
    hooks: { beforeAll, afterAll },
  }: {
    root: URL;
    tables: readonly TableSet[];
    connect: (url: string) => Client;
    hooks: { beforeAll(fn: () => Promise<unknown>): void; afterAll(fn: () => Promise<unknown>): void };
  },
): { readonly url: string; readonly db: Client; empty(options?: { keep?: readonly string[] }): Promise<void> } {
  const url = testDatabaseUrl(service);
  const db = connect(url);
  beforeAll(() => migrateForTests(url, fileURLToPath(new URL('prisma/migrations', root)), tables));
  afterAll(async () => {
    await db.$disconnect();
    await dropDatabase(url);
  });
  return {
    url,
    db,
    async empty({ keep = [] } = {}) {
      const rows = await db.$queryRaw<{ name: string }[]>`
        SELECT quote_ident(tablename) AS name FROM pg_tables
         WHERE schemaname = 'public' AND tablename <> '_prisma_migrations' AND NOT tablename = ANY(${keep}::text[])`;
      if (rows.length > 0) await db.$executeRawUnsafe(`TRUNCATE ${rows.map((row) => row.name).join(', ')}`);
    },
  };
}

const testDatabaseUrl = (label: string) => `${postgresServerUrl}/${uniqueName(`idem_test_${label}`).toLowerCase()}`;

/** A migrations folder in Prisma's layout, in a temporary directory: name → SQL of each migration. */
export function migrationsFolder(files: Record<string, string> = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'idem-migrations-'));
  writeFileSync(join(dir, 'migration_lock.toml'), 'provider = "postgresql"\n');
  for (const [name, sql] of Object.entries(files)) {
    mkdirSync(join(dir, name));
    writeFileSync(join(dir, name, 'migration.sql'), sql);
  }
  return dir;
}

/** A fresh database with the testkit's schema, and Prisma clients on it. */
export async function createTestDatabase(label: string): Promise<TestDatabase> {
  const { url, drop } = await createMigratedDatabase(label, join(testkitPrismaDir, 'migrations'), PACKAGE_TABLES);
  const clients: PrismaClient[] = [];
  const connect = () => {
    // Its statements prepared, as the services' are.
    const client = new PrismaClient({ adapter: new PrismaPg({ connectionString: url }, preparingStatements()) });
    clients.push(client);
    return client;
  };
  return {
    url,
    prisma: connect(),
    connect,
    async drop() {
      await Promise.all(clients.map((client) => client.$disconnect()));
      await drop();
    },
  };
}

/** Polls until `check` returns a value other than undefined/false, or fails after `timeoutMs`. */
export async function waitFor<T>(
  check: () => Promise<T | undefined | false> | T | undefined | false,
  {
    timeoutMs = 20_000,
    intervalMs = 50,
    what = 'condition',
  }: { timeoutMs?: number; intervalMs?: number; what?: string } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/**
 * Runs `publish` until it resolves: a broker that refuses publications for a while (a Redis Cluster
 * after a failover, a replica still catching up) is asked again, as the relay does. An error
 * `refused` does not recognise is thrown at once.
 */
export function publishUntilAccepted(
  publish: () => Promise<unknown>,
  what: string,
  refused: (error: unknown) => boolean = () => true,
): Promise<true> {
  return waitFor(
    () =>
      publish().then(
        () => true as const,
        (error: unknown) => {
          if (refused(error)) return false;
          throw error;
        },
      ),
    { what },
  );
}

/**
 * A valid envelope of contract `type` with fresh ids: the contract's example body
 * (`exampleBodies`), with `body` fields and envelope fields replaced by `overrides`.
 */
export function testMessage<T extends EventType>(
  type: T,
  { body, ...overrides }: Partial<Omit<Envelope<T>, 'body'>> & { body?: Partial<EventBody<T>> } = {},
): Envelope<T> {
  const now = new Date();
  return {
    messageId: newMessageId(now),
    type,
    producer: serviceOf(type),
    occurredAt: now.toISOString(),
    correlationId: randomUUID(),
    causationId: null,
    aggregateId: randomUUID(),
    aggregateVersion: 1,
    ...overrides,
    body: { ...exampleBodies[type], ...body },
  } as Envelope<T>;
}

/** A valid `orders.order-placed.v1` envelope for one unit of `sku`, with fresh ids. */
export function orderPlacedMessage(
  overrides: Partial<Envelope<'orders.order-placed.v1'>> = {},
  sku = 'sku-1',
): Envelope<'orders.order-placed.v1'> {
  const orderId = randomUUID();
  return testMessage('orders.order-placed.v1', {
    aggregateId: orderId,
    body: { orderId, lines: [{ sku, quantity: 1, unitPriceCents: 500 }], totalCents: 500 },
    ...overrides,
  });
}

/**
 * Migrates a fresh database with a service's hand-written migrations and its packages' tables,
 * and compares it with its schema.prisma plus those packages' models; returns the differences
 * (none when they match).
 */
export async function schemaDriftOf(serviceRoot: string, include: readonly TableSet[]): Promise<string[]> {
  const db = await createMigratedDatabase('drift', join(serviceRoot, 'prisma/migrations'), include);
  try {
    const schema = readFileSync(join(serviceRoot, 'prisma/schema.prisma'), 'utf8');
    return await findSchemaDrift(db.url, `${schema}\n${packageModels(include)}`);
  } finally {
    await db.drop();
  }
}

/** Deletes every Redis key under a BullMQ prefix a test file used. */
export async function deleteQueues(prefix: string): Promise<void> {
  const redis = new Redis(redisUrl);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      if (keys.length > 0) await redis.unlink(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

/**
 * Runs the repository's pnpm (package.json's packageManager, through npx, as CI does) in `cwd`;
 * returns what it printed, or prints it as it comes with `stdio: 'inherit'` (and returns '').
 */
export function pnpm(
  cwd: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
  stdio: 'pipe' | 'inherit' = 'pipe',
): string {
  return execFileSync('npx', pnpmArgs(args), { cwd, env, encoding: 'utf8', stdio }) ?? '';
}

/** {@link pnpm} without blocking, for steps that run side by side. */
export async function pnpmAsync(
  cwd: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<string> {
  return (await run('npx', pnpmArgs(args), { cwd, env, encoding: 'utf8' })).stdout;
}

/** Runs a repository script (TypeScript, through tsx) to its end without blocking; returns what it printed. */
export async function runScript(
  cwd: string,
  script: string,
  args: readonly string[],
  nodeOptions: readonly string[] = [],
): Promise<string> {
  return (await run(process.execPath, ['--import', 'tsx', ...nodeOptions, script, ...args], { cwd, encoding: 'utf8' }))
    .stdout;
}

function pnpmArgs(args: readonly string[]): string[] {
  // Read when called, not on import: the console's image runs the lessons on this kit, with no
  // repository package.json beside it.
  const { packageManager } = JSON.parse(readFileSync(join(testkitPrismaDir, '../../../package.json'), 'utf8')) as {
    packageManager: string;
  };
  return ['-y', packageManager, ...args];
}

/**
 * Starts a script as a real child process, e.g. one that a fault switch will SIGKILL: a
 * TypeScript one through tsx, on the workspace sources; a bundle (`.js`) with node alone. Its
 * stdout is piped for {@link printed}.
 */
export function startScript(script: URL, env: Record<string, string>): ChildProcess {
  const path = fileURLToPath(script);
  const loader = path.endsWith('.ts') ? ['--conditions=development', '--import', 'tsx'] : [];
  return spawn(process.execPath, [...loader, path], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
}

/** Resolves with the signal (or exit code) that ended the child. */
export function exited(child: ChildProcess): Promise<NodeJS.Signals | number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.signalCode ?? child.exitCode);
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
}

/** Resolves once the child printed `line` on stdout. */
export function printed(child: ChildProcess, line: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes(line)) resolve();
    });
    child.once('exit', (code, signal) =>
      reject(new Error(`child exited (${signal ?? code}) before printing "${line}"`)),
    );
  });
}

export { createPostgresServer, postgresBinDir, type PostgresServer } from './postgres-server.js';
export { startOtlpReceiver, type ReceivedSpan } from './otlp-receiver.js';
export { startRedisCluster, type RedisCluster, type RedisClusterNode } from './redis-cluster.js';
export { endlessScript, startRedisServer, type RedisServer } from './redis-server.js';
export { held, heldTransactions, finishedOrWaiting, type HeldHandler } from './held.js';
export { closedPort, listenOnLoopback, startNetworkPath, type NetworkPath } from './network.js';
