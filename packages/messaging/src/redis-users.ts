import { journalKey } from './journal.js';
import { Cluster, Redis } from 'ioredis';
import { queueName, type RedisClient } from './redis.js';
import { subscribersOf } from './subscriptions.js';

/**
 * A Redis user (ACL) for one service: it may reach the keys of the queues it consumes, of the
 * queues its publications are delivered to and the subscribers of the contracts it publishes, its
 * own journal stream and its own rate limits, and of the subscribers of what it subscribes to, only
 * to read them and add its consumers' names — nothing else (no other service's counters to reset,
 * no queue its events do not go to, no subscriber to remove). With one password for all, any
 * process could publish any event (mark an order paid with no charge); with these, a service's
 * credentials reach only its own part of the flow. What a producer still reaches, its subscribers'
 * queues whole, docs/scaling.md "Subscriptions on Redis" says.
 */
export interface RedisUser {
  readonly name: string;
  /** Key patterns (ACL `~pattern`). */
  readonly keys: readonly string[];
  /** Key patterns it may only read (ACL `%R~pattern`). @defaultValue none */
  readonly readOnlyKeys?: readonly string[];
  /**
   * Sets it may only add members to (`SADD`, an ACL selector): the subscribers of the contracts it
   * subscribes to, where it adds its consumers' names and can remove nobody's. @defaultValue none
   */
  readonly addOnlyKeys?: readonly string[];
  /** Its commands, as ACL rules, for a user that is no idem process's (KEDA's, the script watcher's). @defaultValue {@link REDIS_USER_COMMANDS} */
  readonly commands?: readonly string[];
}

/**
 * The commands every idem process needs, as ACL rules: all but the server's administration and
 * the dangerous ones (FLUSHALL, CONFIG, KEYS, …), plus the few of those BullMQ and ioredis use —
 * INFO (the server's version and memory), CLIENT SETNAME, the cluster's topology, and WAIT (the
 * relay's durability check). Not the scripts of others: SCRIPT KILL (stop another service's
 * script), SCRIPT FLUSH (empty the server's script cache), SCRIPT DEBUG (whose synchronous mode
 * holds the server for as long as its client likes) and FUNCTION (a function that never ends is
 * out of SCRIPT KILL's reach). ioredis sends EVAL, then EVALSHA, and never those; only the
 * process that watches for runaway scripts kills one ({@link scriptWatcherRedisUser}).
 */
export const REDIS_USER_COMMANDS = [
  '+@all',
  '-@admin',
  '-@dangerous',
  '+info',
  '+client|setname',
  '+client|getname',
  '+client|id',
  '+cluster|slots',
  '+cluster|nodes',
  '+cluster|shards',
  '+cluster|info',
  '+cluster|myid',
  '+wait',
  '-script|kill',
  '-script|flush',
  '-script|debug',
  '-function',
] as const;

/** Where `service` keeps its rate limits' counters (its Redis user reaches these and no other's). */
export const rateLimitPrefix = (prefix: string, service: string) => `${prefix}:rate-limit:${service}`;

/** What a service reaches at the broker, as `reachOf` in @idem/contracts names it. */
export interface Reach {
  /** Its consumers: their queues. */
  readonly consumes: readonly string[];
  /** The contracts it publishes: their subscribers. */
  readonly publishes: readonly string[];
  /** Its consumers' subscriptions: each consumer and a contract it subscribes to. */
  readonly subscribes: readonly { readonly contract: string; readonly consumer: string }[];
  /** The consumers what it publishes is delivered to: their queues, which its publications write. */
  readonly deliversTo: readonly string[];
}

/** The user of `name` for `service` of the system under `prefix`, reaching what `reach` names. */
export function redisUserOf(
  name: string,
  { prefix, service, redisUrl, ...reach }: { prefix: string; service: string; redisUrl: string } & Reach,
): RedisUser {
  // The queues it takes deliveries from, and those its publications are added to (with the policy
  // each consumer keeps there).
  const queues = [...new Set([...reach.consumes, ...reach.deliversTo])]
    .sort()
    .map((queue) => `${prefix}:${globEscape(queueName(queue, redisUrl))}:*`);
  // The subscribers of what it publishes are its own (it adds the consumers its catalogue names);
  // those of another's contracts it only reads and adds its consumers' names to.
  const publishes = [...new Set(reach.publishes)].sort();
  const subscribed = [...new Set(reach.subscribes.map(({ contract }) => contract))]
    .filter((contract) => !publishes.includes(contract))
    .sort();
  const own = [globEscape(journalKey(prefix, service)), `${globEscape(rateLimitPrefix(prefix, service))}:*`];
  return {
    name,
    keys: [...queues, ...publishes.map((contract) => globEscape(subscribersOf(prefix, contract))), ...own],
    readOnlyKeys: subscribed.map((contract) => globEscape(subscribersOf(prefix, contract))),
    addOnlyKeys: subscribed.map((contract) => globEscape(subscribersOf(prefix, contract))),
  };
}

/**
 * The console's user: it reads the services' journals and nothing else of it (no queue, no rate
 * limit, no FLUSHALL or CONFIG), and owns the keys of the lessons it runs (`idem_lesson_*`, queues
 * of their own that each lesson removes).
 */
export function consoleRedisUser(name: string, { prefix }: { prefix: string }): RedisUser {
  return { name, keys: ['idem_lesson_*'], readOnlyKeys: [`${globEscape(journalKey(prefix, ''))}*`] };
}

/**
 * KEDA's user: the length of the wait lists it scales workers on, nothing else. KEDA's `redis`
 * and `redis-cluster` scalers (2.0 on, go-redis) log in with HELLO (AUTH on older servers),
 * PING once, then every poll send one EVAL of a script that asks the list's TYPE and then its
 * LLEN. EVAL declares its keys read-write, so the lists are `~` keys, not `%R~`; what may run on
 * them, TYPE and LLEN, only reads. go-redis's CLIENT SETINFO and CLIENT MAINT_NOTIFICATIONS are
 * refused, which it ignores. A cluster client also learns the slots (CLUSTER SLOTS) and each
 * command's routing (COMMAND).
 */
export function kedaRedisUser(
  name: string,
  { waitLists, cluster = false }: { waitLists: readonly string[]; cluster?: boolean },
): RedisUser {
  return {
    name,
    keys: [...new Set(waitLists)].sort().map(globEscape),
    commands: ['+ping', '+eval', '+type', '+llen', ...(cluster ? ['+cluster|slots', '+command'] : [])],
  };
}

/**
 * The user of the one process that watches for runaway scripts (`killRunawayScripts`): PING and
 * SCRIPT KILL, no key. An ioredis cluster client also learns the masters (CLUSTER SLOTS), checks
 * the cluster is up (CLUSTER INFO) and names its slots connection (CLIENT SETNAME). Connect it
 * with `enableReadyCheck: false`: a client's own ready check is INFO.
 */
export function scriptWatcherRedisUser(name: string, { cluster = false }: { cluster?: boolean } = {}): RedisUser {
  const clusterClient = cluster ? ['+cluster|slots', '+cluster|info', '+client|setname'] : [];
  return { name, keys: [], commands: ['+ping', '+script|kill', ...clusterClient] };
}

/** The user's rules as `ACL SETUSER` takes them (one argument each), with its password. */
export function aclRules(user: RedisUser, password: string): string[] {
  return [
    'reset',
    'on',
    `>${password}`,
    ...user.keys.map((key) => `~${key}`),
    ...(user.readOnlyKeys ?? []).map((key) => `%R~${key}`),
    'resetchannels',
    ...(user.commands ?? REDIS_USER_COMMANDS),
    // A subscriber's: its names added to the subscribers of what it reads.
    ...(user.addOnlyKeys?.length ? [`(${[...user.addOnlyKeys.map((key) => `%W~${key}`), '+sadd'].join(' ')})`] : []),
  ];
}

/** The user as a line of an ACL file (`aclfile`): what compose and Kubernetes give their Redis. */
export const aclFileLine = (user: RedisUser, password: string) =>
  `user ${user.name} ${aclRules(user, password)
    .filter((rule) => rule !== 'reset')
    .join(' ')}`;

/**
 * Users as an ACL file with a placeholder for each password (`{{<name>}}`), for a deployment to
 * fill in with the passwords it generates or holds (compose's secrets, Kubernetes' Secrets).
 */
export const aclFileTemplate = (users: readonly RedisUser[]) =>
  users.map((user) => aclFileLine(user, `{{${user.name}}}`)).join('\n') + '\n';

/**
 * Creates or replaces `user` on every node of `redis` (a cluster's ACLs are per node), and saves
 * the users to each node's ACL file where it has one, so that they survive a restart (a Redis
 * with none forgets them when it restarts).
 */
export async function setRedisUser(redis: RedisClient, user: RedisUser, password: string): Promise<void> {
  await onEveryNode(redis, async (node) => {
    await node.call('ACL', 'SETUSER', user.name, ...aclRules(user, password));
    await saveUsers(node);
  });
}

/** Removes `name` from every node of `redis` (and from their ACL files). */
export async function deleteRedisUser(redis: RedisClient, name: string): Promise<void> {
  await onEveryNode(redis, async (node) => {
    await node.call('ACL', 'DELUSER', name);
    await saveUsers(node);
  });
}

/**
 * Runs `change` on the one Redis, or on every node of a cluster — replicas included: a replica
 * promoted by a failover must know the users already (the client's own connections reach the
 * masters only).
 */
async function onEveryNode(redis: RedisClient, change: (node: Redis) => Promise<void>): Promise<void> {
  if (!(redis instanceof Cluster)) return change(redis);
  const [master] = redis.nodes('master');
  if (!master) throw new Error('the cluster client knows no master yet');
  const addresses = String(await master.call('CLUSTER', 'NODES'))
    .split('\n')
    .filter((line) => line.trim() && !/\b(fail|noaddr)\b/.test(line.split(' ')[2] ?? ''))
    .map((line) => /^\S+ ([^:\s]+):(\d+)/.exec(line)!)
    .map(([, host, port]) => ({ host: host!, port: Number(port) }));
  const credentials = redis.options.redisOptions ?? {};
  await Promise.all(
    addresses.map(async ({ host, port }) => {
      const node = new Redis({ ...credentials, host, port, lazyConnect: true, maxRetriesPerRequest: 1 });
      try {
        await change(node);
      } finally {
        node.disconnect();
      }
    }),
  );
}

/** `ACL SAVE`, where the server has an ACL file to save to; a server without one keeps them in memory only. */
async function saveUsers(node: Redis): Promise<void> {
  await node.call('ACL', 'SAVE').catch((error: unknown) => {
    if (!/not configured to use an ACL file|no configured ACL file/i.test((error as Error).message)) throw error;
  });
}

/** A key as a glob pattern that matches it alone: `*`, `?`, `[`, `]` and `\` taken literally. */
const globEscape = (key: string) => key.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
