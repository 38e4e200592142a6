import { randomBytes } from 'node:crypto';
import { reachOf, type ServiceName } from '@idem/shop';
import {
  asRedisUser,
  clusterReady,
  connectRedis,
  consoleRedisUser,
  deleteRedisUser,
  isClusterUrl,
  killRunawayScripts,
  mastersOf,
  redisUserOf,
  scriptWatcherRedisUser,
  setRedisUser,
  type RedisUser,
} from '@idem/messaging';

/**
 * A Redis user for each service, as compose and Kubernetes give them: each reaches only its own
 * queues and subscriptions, and the queues its events go to (docs/operations.md "Redis users");
 * the console's, which reads the journal and owns its lessons' queues; and the script watcher's,
 * which may only PING and SCRIPT KILL. Made with a fresh password on the system's Redis (every
 * node of a cluster) as the system starts, removed as it stops. `as` turns a service's (or the console's, or the
 * watcher's) REDIS_URL into one that logs in as its user.
 */
export async function provisionRedisUsers(
  redisUrl: string,
  prefix: string,
  services: readonly ServiceName[],
): Promise<{
  as(part: ServiceName | 'console' | 'script-watcher', url: string): string;
  remove(): Promise<void>;
  version: string;
}> {
  const admin = connectRedis(redisUrl, { maxRetriesPerRequest: 3 });
  try {
    await clusterReady(admin);
    const password = () => randomBytes(24).toString('hex');
    const users = new Map<ServiceName | 'console' | 'script-watcher', { user: RedisUser; password: string }>([
      ...services.map((service) => {
        const user = redisUserOf(`${prefix}-${service}`, { prefix, service, redisUrl, ...reachOf(service) });
        return [service, { user, password: password() }] as const;
      }),
      ['console', { user: consoleRedisUser(`${prefix}-console`, { prefix }), password: password() }],
      [
        'script-watcher',
        {
          user: scriptWatcherRedisUser(`${prefix}-script-watcher`, { cluster: isClusterUrl(redisUrl) }),
          password: password(),
        },
      ],
    ]);
    for (const { user, password } of users.values()) await setRedisUser(admin, user, password);
    const version = /^redis_version:(\S+)/m.exec(await mastersOf(admin)[0]!.info('server'))?.[1] ?? 'unknown';
    return {
      version,
      as: (service, url) => {
        const { user, password } = users.get(service)!;
        return asRedisUser(url, user.name, password);
      },
      remove: async () => {
        const cleanup = connectRedis(redisUrl, { maxRetriesPerRequest: 3 });
        try {
          await clusterReady(cleanup);
          for (const { user } of users.values()) await deleteRedisUser(cleanup, user.name);
        } finally {
          cleanup.disconnect();
        }
      },
    };
  } finally {
    admin.disconnect();
  }
}

/**
 * The system's one watch for a script that never ends (`killRunawayScripts`), in this process, on
 * `redisUrl` as the watcher's user: the services neither watch nor may kill a script. Its user
 * may not INFO, ioredis's ready check. Returns a function that stops it.
 */
export function watchRunawayScripts(redisUrl: string, log: (line: string) => void): () => void {
  const redis = connectRedis(redisUrl, { enableReadyCheck: false, maxRetriesPerRequest: 1 });
  redis.on('error', () => {}); // Redis down is the services' to report, not this watch's
  const stop = killRunawayScripts(redis, {
    onBusy: (outcome) => log(`a Lua script held Redis past its busy-reply-threshold: ${outcome}`),
  });
  return () => {
    stop();
    redis.disconnect();
  };
}

/** The first release of each line with the Lua sandbox fixes (CVE-2025-49844 and others) that cross-user isolation rests on. */
const LUA_SANDBOX_FIXED: Record<string, number> = { '7.2': 11, '7.4': 6, '8.0': 4, '8.2': 2 };

/** Whether Redis `version` (`7.0.15`) has those fixes: compose and Kubernetes pin 7.4.6. */
export function hasLuaSandboxFixes(version: string): boolean {
  const [major = 0, minor = 0, patch = 0] = version.split('.').map(Number);
  const fixedFrom = LUA_SANDBOX_FIXED[`${major}.${minor}`];
  if (fixedFrom !== undefined) return patch >= fixedFrom;
  return major > 8 || (major === 8 && minor > 2);
}
