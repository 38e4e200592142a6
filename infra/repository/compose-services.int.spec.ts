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
import { createPostgresServer, endlessScript, exited, waitFor, type PostgresServer } from '@idem/testkit';
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

/** Redis as compose starts it (its command, its users file), on a port of the test's own. */
function startComposeRedis() {
  const dir = mkdtempSync(join(tmpdir(), 'idem-redis-'));
  const port = randomInt(16_400, 17_000);
  // The users file is in Redis's secrets volume: here, a folder of its share.
  const secretsDir = secretsFolder('redis');
  const command = services.redis!.command!.map((arg) => arg.replaceAll(`${SECRETS_DIR}/`, `${secretsDir}/`));
  const server = spawn('redis-server', [...command, '--port', String(port), '--bind', '127.0.0.1', '--dir', dir], {
    stdio: 'ignore',
  });
  return {
    port,
    server,
    /** A compose URL, pointed at this server. */
    on: (composeUrl: string) => {
      const url = new URL(composeUrl);
      url.host = `127.0.0.1:${port}`;
      return url.toString();
    },
    async stop() {
      server.kill('SIGKILL');
      await exited(server);
      rmSync(dir, { recursive: true, force: true });
      rmSync(secretsDir, { recursive: true, force: true });
    },
  };
}

// Commands wait while ioredis retries its connection, until the server listens.
const connect = (url: string) => {
  const client = new Redis(url, { retryStrategy: () => 100 });
  client.on('error', () => {}); // refusals until it listens
  return client;
};

describe("Redis with compose's command and users", () => {
  it('admits each service as its own user, only to its queues, the console to the journal alone, and the default user by password; no password on its command line; append-only, a memory limit, noeviction', async () => {
    const redis = startComposeRedis();
    const operator = connect(redis.on(secrets['redis-url']!));
    const console_ = connect(redis.on(environments.console!.REDIS_URL!));
    const inventory = connect(redis.on(environments.inventory!.REDIS_URL!));
    const anonymous = connect(`redis://127.0.0.1:${redis.port}`);
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
      const commandLine = readFileSync(`/proc/${redis.server.pid}/cmdline`, 'utf8');
      for (const name of ['redis-password', 'inventory-redis-password', 'console-redis-password'])
        expect(commandLine, name).not.toContain(secrets[name]!);
    } finally {
      for (const client of [operator, console_, inventory, anonymous]) client.disconnect();
      await redis.stop();
    }
  }, 30_000);

  it("kills a script that never ends with compose's redis-script-watcher, as its own user: a service's user may neither kill a script nor flush them", async () => {
    const redis = startComposeRedis();
    const inventory = connect(redis.on(environments.inventory!.REDIS_URL!));
    // The watcher as compose runs it: its entrypoint, its script and secrets, its environment.
    const watcher = services['redis-script-watcher']!;
    const secretsDir = secretsFolder('redis-script-watcher');
    const mounted = Object.fromEntries(
      watcher.volumes!.filter((v) => v.startsWith('./')).map((v) => [v.split(':')[1]!, join(root, v.split(':')[0]!)]),
    );
    const env = Object.fromEntries(
      Object.entries(watcher.environment!).map(([name, value]) => [
        name,
        String(value).replace(`${SECRETS_DIR}/`, `${secretsDir}/`),
      ]),
    );
    const [shell, ...args] = watcher.entrypoint!.map((arg) => mounted[arg] ?? arg);
    let printed = '';
    let stopped: Awaited<ReturnType<typeof exited>> = null;
    const watching = spawn(shell!, args, {
      env: { ...process.env, ...env, REDIS_HOST: '127.0.0.1', REDIS_PORT: String(redis.port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    for (const stream of [watching.stdout!, watching.stderr!])
      stream.on('data', (chunk: Buffer) => (printed += chunk.toString()));
    try {
      expect(await inventory.ping()).toBe('PONG');
      await expect(inventory.call('SCRIPT', 'KILL')).rejects.toThrow(/NOPERM/);
      await expect(inventory.call('SCRIPT', 'FLUSH')).rejects.toThrow(/NOPERM/);
      const { ended, afterMs } = await endlessScript(inventory);
      expect(ended).toMatch(/killed/i);
      expect(afterMs).toBeLessThan(5_000); // the threshold (1 s) and a ping or two
      await waitFor(() => printed.includes('busy-reply-threshold: killed'), { what: "the watcher's report" });
      expect(printed).not.toMatch(/cannot watch/);
    } finally {
      watching.kill('SIGTERM');
      stopped = await exited(watching);
      inventory.disconnect();
      await redis.stop();
      rmSync(secretsDir, { recursive: true, force: true });
    }
    expect(stopped).toBe(0); // it stops when told
  }, 30_000);
});
