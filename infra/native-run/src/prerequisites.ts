import { Redis } from 'ioredis';
import pg from 'pg';

export interface Prerequisites {
  /** A PostgreSQL server URL (no database) and the variable it came from. */
  readonly postgres: { readonly url: string; readonly variable: string };
  readonly redis: { readonly url: string; readonly variable: string };
}

/**
 * Checks that PostgreSQL and Redis answer before anything needs them. Returns what a person
 * should read when one does not — which server, where, and the ways to get it — or undefined
 * when both answer. Never shows a password.
 */
export async function unreachablePrerequisites({ postgres, redis }: Prerequisites): Promise<string | undefined> {
  const [postgresError, redisError] = await Promise.all([reachPostgres(postgres.url), reachRedis(redis.url)]);
  if (!postgresError && !redisError) return undefined;
  const where = (url: string, fallbackPort: number) => `${new URL(url).hostname}:${new URL(url).port || fallbackPort}`;
  return [
    'idem needs PostgreSQL and Redis on this machine, and cannot reach:',
    ...(postgresError
      ? [`  - PostgreSQL at ${where(postgres.url, 5432)} (${postgres.variable}): ${postgresError}`]
      : []),
    ...(redisError ? [`  - Redis at ${where(redis.url, 6379)} (${redis.variable}): ${redisError}`] : []),
    'Start them one of these ways, then run this again:',
    '  - from the OS packages (Debian/Ubuntu): apt-get install -y postgresql redis-server; the default',
    '    connection is user postgres on 127.0.0.1:5432 without a password',
    '    (CONTRIBUTING.md "Run it without Docker"; bash scripts/start.sh does all of it).',
    '  - from docker compose: docker compose up -d postgres redis, then set',
    `    ${postgres.variable}=postgresql://postgres:<password>@127.0.0.1:15432 and`,
    `    ${redis.variable}=redis://:<password>@127.0.0.1:16379, the passwords from`,
    '    docker compose exec postgres cat /run/idem-secrets/postgres-password (and redis-password).',
  ].join('\n');
}

async function reachPostgres(url: string): Promise<string | undefined> {
  const server = new URL(url);
  server.pathname = '/postgres';
  const client = new pg.Client({ connectionString: server.toString(), connectionTimeoutMillis: 3_000 });
  try {
    await client.connect();
    return undefined;
  } catch (error) {
    return describe(error);
  } finally {
    await client.end().catch(() => {});
  }
}

async function reachRedis(url: string): Promise<string | undefined> {
  const redis = new Redis(url, {
    lazyConnect: true,
    connectTimeout: 3_000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  let cause: unknown; // the socket's error; connect() itself only says the connection closed
  redis.on('error', (error) => (cause ??= error));
  try {
    await redis.connect();
    await redis.ping();
    return undefined;
  } catch (error) {
    return describe(cause ?? error);
  } finally {
    redis.disconnect();
  }
}

function describe(error: unknown): string {
  const { code, message } = error as { code?: string; message?: string };
  if (code === 'ECONNREFUSED') return 'nothing listens there (ECONNREFUSED)';
  return code ? `${message ?? 'failed'} (${code})` : (message ?? String(error));
}
