import { Cluster, Redis, type RedisOptions } from 'ioredis';

/** Where BullMQ keeps its queues; a distinct prefix isolates a test run or a tenant. */
export interface BrokerOptions {
  /**
   * `redis://…` for one Redis, `redis+cluster://[user:password@]host:port[,host:port…]` for a
   * Redis Cluster reached through any of those nodes.
   * @defaultValue process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
   */
  readonly redisUrl?: string;
  /** BullMQ key prefix. @defaultValue 'idem' */
  readonly prefix?: string;
}

/** The broker URL and key prefix: the options given, else REDIS_URL and `idem`. */
export function resolveBroker(options: BrokerOptions = {}): Required<BrokerOptions> {
  return {
    redisUrl: options.redisUrl ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    prefix: options.prefix ?? 'idem',
  };
}

/** One Redis, or a Redis Cluster: the commands idem sends work on either. */
export type RedisClient = Redis | Cluster;

const CLUSTER_SCHEME = 'redis+cluster://';

/** Whether a broker URL names a Redis Cluster (`redis+cluster://`). */
export const isClusterUrl = (redisUrl: string) => redisUrl.startsWith(CLUSTER_SCHEME);

/** The masters: the one Redis, or each master of a cluster (as the client last learned them). */
export const mastersOf = (redis: RedisClient): Redis[] => (redis instanceof Cluster ? redis.nodes('master') : [redis]);

/**
 * The nodes and credentials of a `redis+cluster://[user:password@]host:port[,host:port…]` URL;
 * throws on anything else.
 */
export function clusterOf(redisUrl: string) {
  if (!isClusterUrl(redisUrl)) throw new Error('not a redis+cluster:// URL');
  const rest = redisUrl.slice(CLUSTER_SCHEME.length).replace(/\/.*$/, '');
  const at = rest.lastIndexOf('@');
  const [username, password] = at < 0 ? [] : rest.slice(0, at).split(':').map(decodeURIComponent);
  const nodes = (at < 0 ? rest : rest.slice(at + 1)).split(',').map((node) => {
    const match = /^([^:,]+)(?::(\d{1,5}))?$/.exec(node);
    if (!match) throw new Error(`not a host:port: "${node}"`);
    return { host: match[1]!, port: Number(match[2] ?? 6379) };
  });
  return { nodes, ...(username ? { username } : {}), ...(password ? { password } : {}) };
}

/** `redisUrl` (one Redis or a cluster) as `username` with `password`, in place of any credentials it had. */
export function asRedisUser(redisUrl: string, username: string, password: string): string {
  const credentials = `${encodeURIComponent(username)}:${encodeURIComponent(password)}@`;
  if (isClusterUrl(redisUrl)) {
    const rest = redisUrl.slice(CLUSTER_SCHEME.length);
    return `${CLUSTER_SCHEME}${credentials}${rest.slice(rest.lastIndexOf('@') + 1)}`;
  }
  const url = new URL(redisUrl);
  url.username = encodeURIComponent(username);
  url.password = encodeURIComponent(password);
  return url.toString();
}

/** True for a URL `connectRedis` takes: `redis://`, `rediss://`, or `redis+cluster://` with its nodes. */
export function isRedisUrl(redisUrl: string): boolean {
  try {
    if (isClusterUrl(redisUrl)) return clusterOf(redisUrl).nodes.length > 0;
    return /^rediss?:$/.test(new URL(redisUrl).protocol);
  } catch {
    return false;
  }
}

/** A connection to the Redis or the Redis Cluster `redisUrl` names (see {@link BrokerOptions}). */
export function connectRedis(redisUrl: string, options: RedisOptions = {}): RedisClient {
  if (!isClusterUrl(redisUrl)) return new Redis(redisUrl, options);
  const { nodes, ...credentials } = clusterOf(redisUrl);
  const { enableOfflineQueue, ...perNode } = options;
  return new Cluster(nodes, {
    redisOptions: { ...perNode, ...credentials },
    ...(enableOfflineQueue === undefined ? {} : { enableOfflineQueue }),
  });
}

/**
 * The BullMQ queue of a consumer. BullMQ keeps all of a queue's keys in one hash slot only when
 * its name or prefix holds a hash tag; in a cluster the name is the tag (`{billing.book-lent.v1}`),
 * so every queue has a slot of its own and the queues spread over the masters. A prefix with a
 * tag (`{idem}`) would be correct too, but would put every queue on one node.
 */
export function queueName(consumer: string, redisUrl: string): string {
  return isClusterUrl(redisUrl) ? `{${consumer}}` : consumer;
}

/**
 * Resolves once a cluster client knows the cluster (its slots and nodes), or fails after
 * `timeoutMs`. BullMQ asks a connection for the server's version as soon as a queue is made, and
 * a cluster client that fails fast (no offline queue) refuses that until it is ready; one Redis
 * BullMQ waits for itself.
 */
export const clusterReady = (redis: RedisClient, timeoutMs = 10_000): Promise<void> =>
  redis instanceof Cluster ? whenReady(redis, timeoutMs) : Promise.resolve();

/** Resolves once `redis` is ready for commands (one that fails fast refuses them before), or fails after `timeoutMs`. */
export async function whenReady(redis: RedisClient, timeoutMs = 10_000): Promise<void> {
  if (redis.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => done(new Error(`Redis was not ready within ${timeoutMs} ms`)), timeoutMs);
    const ready = () => done();
    const done = (error?: Error) => {
      clearTimeout(timer);
      redis.off('ready', ready);
      if (error) reject(error);
      else resolve();
    };
    redis.once('ready', ready);
  });
}

/**
 * Workers block on Redis and must retry forever (BullMQ requires maxRetriesPerRequest: null).
 * Producers must fail fast instead, so a relay notices a broker outage and backs off; and a
 * producer's connection that opened but is not ready `timeoutMs` later (its handshake unanswered,
 * as behind a dead link, where nothing ever closes it) is dropped, so ioredis opens another.
 */
export function createRedis(redisUrl: string, role: 'worker'): RedisClient;
export function createRedis(redisUrl: string, role: 'producer', timeoutMs: number): RedisClient;
export function createRedis(redisUrl: string, role: 'worker' | 'producer', timeoutMs?: number): RedisClient {
  if (role === 'worker') return connectRedis(redisUrl, { maxRetriesPerRequest: null });
  const redis = connectRedis(redisUrl, { maxRetriesPerRequest: 1, enableOfflineQueue: false });
  redis.on('error', () => {}); // its commands fail, and say why: no unhandled error event besides
  let timer: NodeJS.Timeout | undefined;
  redis.on('connect', () => {
    clearTimeout(timer);
    timer = setTimeout(() => redis.status === 'connect' && redis.disconnect(true), timeoutMs);
    timer.unref();
  });
  redis.on('ready', () => clearTimeout(timer));
  return redis;
}

/**
 * Drops `redis`'s connection — once, however many ask before it has closed: ioredis ends its
 * socket (destroys it when the end goes unanswered, as on a dead link) and opens another.
 */
export function droppingOnce(redis: RedisClient): () => void {
  let dropping = false;
  redis.on('close', () => (dropping = false));
  return () => {
    if (!dropping) redis.disconnect(true);
    dropping = true;
  };
}
