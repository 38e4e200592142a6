import { journalKey } from './journal.js';
import { queueName, type RedisClient } from './redis.js';

/**
 * A Redis user (ACL) for one service: it may reach the keys of the queues it consumes and of
 * those it publishes to, the system's journal and its rate limits — nothing else. With one
 * password for all, any process could add any job to any queue (mark an order paid with no
 * charge); with these, a service's credentials reach only its own part of the flow.
 */
export interface RedisUser {
  readonly name: string;
  /** Key patterns (ACL `~pattern`). */
  readonly keys: readonly string[];
}

/**
 * The commands every idem process needs, as ACL rules: all but the server's administration and
 * the dangerous ones (FLUSHALL, CONFIG, KEYS, …), plus the few of those BullMQ and ioredis use —
 * INFO (the server's version and memory), CLIENT SETNAME, the cluster's topology, and WAIT (the
 * relay's durability check).
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
] as const;

/** The user of `name` that reaches `queues` (consumer names) of the system under `prefix`. */
export function redisUserOf(
  name: string,
  { prefix, redisUrl, queues }: { prefix: string; redisUrl: string; queues: readonly string[] },
): RedisUser {
  const queueKeys = [...new Set(queues)].sort().map((queue) => `${prefix}:${globEscape(queueName(queue, redisUrl))}:*`);
  return { name, keys: [...queueKeys, globEscape(journalKey(prefix)), `${globEscape(prefix)}:rate-limit:*`] };
}

/** The user's rules as `ACL SETUSER` takes them (one argument each), with its password. */
export function aclRules(user: RedisUser, password: string): string[] {
  return ['reset', 'on', `>${password}`, ...user.keys.map((key) => `~${key}`), 'resetchannels', ...REDIS_USER_COMMANDS];
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

/** Creates or replaces `user` on every master of `redis` (a cluster's ACLs are per node). */
export async function setRedisUser(redis: RedisClient, user: RedisUser, password: string): Promise<void> {
  const nodes = 'nodes' in redis ? redis.nodes('all') : [redis];
  await Promise.all(nodes.map((node) => node.call('ACL', 'SETUSER', user.name, ...aclRules(user, password))));
}

/** Removes `name` from every node of `redis`. */
export async function deleteRedisUser(redis: RedisClient, name: string): Promise<void> {
  const nodes = 'nodes' in redis ? redis.nodes('all') : [redis];
  await Promise.all(nodes.map((node) => node.call('ACL', 'DELUSER', name)));
}

/** A key as a glob pattern that matches it alone: `*`, `?`, `[`, `]` and `\` taken literally. */
const globEscape = (key: string) => key.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
