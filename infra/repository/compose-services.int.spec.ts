/**
 * The parts of `docker compose up` that run as they are on this machine: the PostgreSQL init
 * script against a real server (roles, ownership, who may connect where, the services'
 * migrations applied as their own roles) and Redis started with compose's own command.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrate } from '@idem/database';
import { createPostgresServer, exited, type PostgresServer } from '@idem/testkit';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCompose, root, SECRETS_DIR } from './compose-file.js';
import { SERVICE_CONFIGS } from './service-configs.js';

const { secrets, shared, services, environments } = loadCompose();

/** A container's share of the generated secrets in a folder, as compose mounts its volume. */
function secretsFolder(container: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'idem-secrets-'));
  for (const [name, value] of Object.entries(shared[container] ?? {})) writeFileSync(join(dir, name), value);
  return dir;
}
const SERVICES = Object.keys(SERVICE_CONFIGS) as (keyof typeof SERVICE_CONFIGS)[];

describe('infra/postgres/init.sh on a real PostgreSQL', () => {
  let server: PostgresServer;
  /** A service's DATABASE_URL from compose, pointed at the test server. */
  const onTestServer = (composeUrl: string, database: string) => {
    const url = new URL(composeUrl);
    url.host = `127.0.0.1:${server.port}`;
    url.pathname = `/${database}`;
    return url.toString();
  };
  /** A service's DATABASE_URL from compose (its runtime role), pointed at the test server. */
  const urlOf = (service: string, database = service) => onTestServer(environments[service]!.DATABASE_URL!, database);
  /** The migrate job's URL for a service (the role that owns its database). */
  const ownerUrlOf = (service: string) =>
    onTestServer(environments.migrate![`${service.toUpperCase()}_DATABASE_URL`]!, service);
  const connect = async (url: string) => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    return client;
  };

  beforeAll(async () => {
    server = await createPostgresServer({ port: 15_481 });
    await server.start();
    const dir = secretsFolder('postgres');
    const env = {
      ...process.env,
      IDEM_SECRETS: dir,
      POSTGRES_USER: 'postgres',
      PGHOST: '127.0.0.1',
      PGPORT: String(server.port),
    };
    try {
      execFileSync('sh', [join(root, 'infra/postgres/init.sh')], { env, stdio: 'pipe' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  afterAll(() => server?.destroy());

  it('gives each service a role that owns its database and is no superuser', async () => {
    const admin = await connect(`${server.url}/postgres`);
    try {
      const { rows } = await admin.query<{
        datname: string;
        owner: string;
        rolsuper: boolean;
        rolcreatedb: boolean;
        rolcreaterole: boolean;
      }>(
        `SELECT d.datname, r.rolname AS owner, r.rolsuper, r.rolcreatedb, r.rolcreaterole
           FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE d.datname = ANY($1) ORDER BY 1`,
        [[...SERVICES]],
      );
      expect(rows).toEqual(
        [...SERVICES]
          .sort()
          .map((s) => ({ datname: s, owner: s, rolsuper: false, rolcreatedb: false, rolcreaterole: false })),
      );
    } finally {
      await admin.end();
    }
  });

  it("migrates each service's database as the role that owns it, granting the runtime role, as the migrate job does", async () => {
    for (const service of SERVICES) {
      const applied = await migrate({
        databaseUrl: ownerUrlOf(service),
        migrationsDir: join(root, 'services', service, 'prisma/migrations'),
        include: SERVICE_CONFIGS[service].tables,
        runtimeRole: `${service}_runtime`,
      });
      expect(applied.length, service).toBeGreaterThan(0);
    }
  });

  it("lets each service's runtime role change its data and not its schema", async () => {
    for (const service of SERVICES) {
      const runtime = await connect(urlOf(service));
      try {
        // Privileges are checked whether or not a row matches.
        for (const dml of [
          'INSERT INTO processed_messages SELECT * FROM processed_messages WHERE false',
          'UPDATE processed_messages SET processed_at = now() WHERE false',
          'DELETE FROM processed_messages WHERE false',
        ]) {
          await runtime.query(dml);
        }
        await expect(runtime.query('DROP TABLE processed_messages'), service).rejects.toMatchObject({ code: '42501' });
        await expect(runtime.query('CREATE TABLE sneaky (id int)'), service).rejects.toMatchObject({ code: '42501' });
        // Retention's partition upkeep, and only through the functions that check what they are asked.
        const made = await runtime.query(
          `SELECT idem_inbox_add_partition(now() + interval '5 days', now() + interval '6 days') AS r`,
        );
        expect(made.rows, service).toEqual([{ r: 'added' }]);
        await runtime.query(`SELECT * FROM idem_inbox_drop_partitions(now() - interval '30 days')`);
        await expect(runtime.query('DROP TABLE processed_messages_default'), service).rejects.toMatchObject({
          code: '42501',
        });
      } finally {
        await runtime.end();
      }
    }
  });

  it("lets the console's role read every service's database and change none", async () => {
    for (const service of SERVICES) {
      const console_ = await connect(
        onTestServer(environments.console![`${service.toUpperCase()}_DATABASE_URL`]!, service),
      );
      try {
        expect((await console_.query('SELECT count(*) FROM processed_messages')).rows, service).toHaveLength(1);
        await expect(console_.query(`DELETE FROM processed_messages`), service).rejects.toMatchObject({
          code: '42501',
        });
        await expect(console_.query(`SELECT * FROM idem_inbox_drop_partitions(now())`), service).rejects.toMatchObject({
          code: '42501',
        });
      } finally {
        await console_.end();
      }
    }
  });

  it("refuses a service's roles a connection to another service's database", async () => {
    await expect(connect(urlOf('orders', 'payments'))).rejects.toMatchObject({ code: '42501' });
    await expect(connect(urlOf('notifications', 'orders'))).rejects.toMatchObject({ code: '42501' });
    await expect(connect(onTestServer(environments.migrate!.ORDERS_DATABASE_URL!, 'payments'))).rejects.toMatchObject({
      code: '42501',
    });
  });
});

describe("Redis with compose's command and users", () => {
  it('admits each service as its own user, only to its queues, the console to the journal alone, and the default user by password; no password on its command line; append-only, a memory limit, noeviction', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'idem-redis-'));
    const port = randomInt(16_400, 17_000);
    // The users file is in Redis's secrets volume: here, a folder of its share.
    const secretsDir = secretsFolder('redis');
    const command = services.redis!.command!.map((arg) => arg.replaceAll(`${SECRETS_DIR}/`, `${secretsDir}/`));
    const redisServer = spawn(
      'redis-server',
      [...command, '--port', String(port), '--bind', '127.0.0.1', '--dir', dir],
      {
        stdio: 'ignore',
      },
    );
    const on = (composeUrl: string) => {
      const url = new URL(composeUrl);
      url.host = `127.0.0.1:${port}`;
      return url.toString();
    };
    // Commands wait while ioredis retries its connection, until the server listens.
    const connect = (url: string | undefined) => {
      const client = url ? new Redis(url, { retryStrategy: () => 100 }) : new Redis({ port, retryStrategy: () => 100 });
      client.on('error', () => {}); // refusals until it listens
      return client;
    };
    const operator = connect(on(secrets['redis-url']!));
    const console_ = connect(on(environments.console!.REDIS_URL!));
    const inventory = connect(on(environments.inventory!.REDIS_URL!));
    const anonymous = connect(undefined);
    try {
      expect(await inventory.ping()).toBe('PONG');
      await expect(anonymous.ping()).rejects.toThrow(/NOAUTH/);
      // Its own queue, yes; a queue it does not publish to (a capture), no; the server's settings, no.
      await inventory.lpush('idem:inventory.order-placed.v1:wait', 'job');
      await expect(inventory.lpush('idem:orders.payment-captured.v1:wait', 'forged')).rejects.toThrow(/NOPERM/);
      await expect(inventory.config('GET', 'maxmemory')).rejects.toThrow(/NOPERM/);
      // Inventory writes its own journal and its own rate limits, and no other service's.
      await inventory.xadd('idem:journal:inventory', '*', 'entry', '{}');
      await expect(inventory.xadd('idem:journal:payments', '*', 'entry', '{}')).rejects.toThrow(/NOPERM/);
      await expect(inventory.set('idem:rate-limit:orders:address:10.0.0.1', '0')).rejects.toThrow(/NOPERM/);
      // The console reads the journals and nothing else: no queue, no setting.
      expect(await console_.xrange('idem:journal:inventory', '-', '+')).toHaveLength(1);
      await expect(console_.xadd('idem:journal:inventory', '*', 'entry', '{}')).rejects.toThrow(/NOPERM/);
      await expect(console_.lpush('idem:inventory.order-placed.v1:wait', 'job')).rejects.toThrow(/NOPERM/);
      await expect(console_.config('GET', 'maxmemory')).rejects.toThrow(/NOPERM/);
      expect(await operator.config('GET', 'appendonly')).toEqual(['appendonly', 'yes']);
      expect(await operator.config('GET', 'maxmemory-policy')).toEqual(['maxmemory-policy', 'noeviction']);
      expect(await operator.config('GET', 'busy-reply-threshold')).toEqual(['busy-reply-threshold', '1000']);
      expect(((await operator.config('GET', 'maxmemory')) as string[])[1]).toBe(String(256 * 1024 * 1024));
      const commandLine = readFileSync(`/proc/${redisServer.pid}/cmdline`, 'utf8');
      for (const name of ['redis-password', 'inventory-redis-password', 'console-redis-password'])
        expect(commandLine, name).not.toContain(secrets[name]!);
    } finally {
      for (const client of [operator, console_, inventory, anonymous]) client.disconnect();
      redisServer.kill('SIGTERM');
      await exited(redisServer);
      rmSync(dir, { recursive: true, force: true });
      rmSync(secretsDir, { recursive: true, force: true });
    }
  }, 30_000);
});
