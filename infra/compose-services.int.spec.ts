/**
 * The parts of `docker compose up` that run as they are on this machine: the PostgreSQL init
 * script against a real server (roles, ownership, who may connect where, the services'
 * migrations applied as their own roles) and Redis started with compose's own command.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrate } from '@idem/database';
import { createPostgresServer, exited, type PostgresServer } from '@idem/testkit';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCompose, root } from './compose-file.js';
import { SERVICE_CONFIGS } from './service-configs.js';

const { dotEnv, services } = loadCompose();
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
  /** A service's DATABASE_URL from compose (its own role), pointed at the test server. */
  const urlOf = (service: string, database = service) =>
    onTestServer(services[service]!.environment!.DATABASE_URL!, database);
  const connect = async (url: string) => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    return client;
  };

  beforeAll(async () => {
    server = await createPostgresServer({ port: 15_481 });
    await server.start();
    const env = {
      ...process.env,
      ...dotEnv,
      POSTGRES_USER: 'postgres',
      PGHOST: '127.0.0.1',
      PGPORT: String(server.port),
    };
    execFileSync('sh', [join(root, 'infra/postgres/init.sh')], { env, stdio: 'pipe' });
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

  it("migrates each service's database as its own role, as the migrate job does", async () => {
    for (const service of SERVICES) {
      const applied = await migrate({
        databaseUrl: urlOf(service),
        migrationsDir: join(root, 'services', service, 'prisma/migrations'),
        include: SERVICE_CONFIGS[service].tables,
      });
      expect(applied.length, service).toBeGreaterThan(0);
    }
  });

  it("lets the console's role read every service's database and change none", async () => {
    for (const service of SERVICES) {
      const console_ = await connect(
        onTestServer(services.console!.environment![`${service.toUpperCase()}_DATABASE_URL`]!, service),
      );
      try {
        expect((await console_.query('SELECT count(*) FROM processed_messages')).rows, service).toHaveLength(1);
        await expect(console_.query(`DELETE FROM processed_messages`), service).rejects.toMatchObject({
          code: '42501',
        });
      } finally {
        await console_.end();
      }
    }
  });

  it("refuses a service's role a connection to another service's database", async () => {
    await expect(connect(urlOf('orders', 'payments'))).rejects.toMatchObject({ code: '42501' });
    await expect(connect(urlOf('notifications', 'orders'))).rejects.toMatchObject({ code: '42501' });
  });
});

describe("Redis with compose's command", () => {
  it('requires the password, keeps an append-only file, has a memory limit and evicts nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'idem-redis-'));
    const port = randomInt(16_400, 17_000);
    const [command, ...args] = services.redis!.command!;
    const redisServer = spawn(command!, [...args, '--port', String(port), '--bind', '127.0.0.1', '--dir', dir], {
      stdio: 'ignore',
    });
    const url = new URL(services.orders!.environment!.REDIS_URL!);
    url.host = `127.0.0.1:${port}`;
    // Commands wait while ioredis retries its connection, until the server listens.
    const service = new Redis(url.toString(), { retryStrategy: () => 100 });
    const anonymous = new Redis({ port, host: '127.0.0.1', retryStrategy: () => 100 });
    for (const client of [service, anonymous]) client.on('error', () => {}); // refusals until it listens
    try {
      expect(await service.ping()).toBe('PONG');
      await expect(anonymous.ping()).rejects.toThrow(/NOAUTH/);
      expect(await service.config('GET', 'appendonly')).toEqual(['appendonly', 'yes']);
      expect(await service.config('GET', 'maxmemory-policy')).toEqual(['maxmemory-policy', 'noeviction']);
      expect(((await service.config('GET', 'maxmemory')) as string[])[1]).toBe(String(256 * 1024 * 1024));
    } finally {
      anonymous.disconnect();
      service.disconnect();
      redisServer.kill('SIGTERM');
      await exited(redisServer);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
