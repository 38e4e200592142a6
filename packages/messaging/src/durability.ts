import calculateSlot from 'cluster-key-slot';
import { Cluster, type Redis } from 'ioredis';
import { mastersOf, type RedisClient } from './redis.js';

/**
 * What "published" means before the relay marks a row: Redis took the jobs (`none`), a replica
 * has them too (`replica`, `WAIT 1`), or Redis wrote them to its own disk (`disk`, `WAITAOF 1 0`,
 * Redis 7.2 and later). `auto` is `replica` when the server has a replica when the publisher
 * first publishes, `none` when it has none. A master that dies right after acknowledging a write
 * it had not passed on takes the jobs with it: only a publication confirmed at the chosen level
 * is marked, and one that is not is published again (docs/failure-windows.md).
 */
export type Durability = 'none' | 'replica' | 'disk';
/** The values RELAY_DURABILITY accepts (the `durability` of a publisher): a {@link Durability}, or `auto` (what the broker offers). */
export const DURABILITIES = ['auto', 'none', 'replica', 'disk'] as const;

/** The publication reached Redis but not the durability asked for: the relay publishes it again. */
export class NotDurableError extends Error {}

/** How long a write waits for its durability by default. */
export const DURABILITY_TIMEOUT_MS = 1_000;

/** `auto` resolved against the server: `replica` where every master has one connected, else `none`. */
export async function resolveDurability(redis: RedisClient, asked: (typeof DURABILITIES)[number]): Promise<Durability> {
  if (asked !== 'auto') return asked;
  const replicated = await Promise.all(
    mastersOf(redis).map(async (node) => {
      const replication = await node.info('replication');
      return Number(/^connected_slaves:(\d+)/m.exec(replication)?.[1] ?? 0) > 0;
    }),
  );
  return replicated.length > 0 && replicated.every(Boolean) ? 'replica' : 'none';
}

/**
 * The connections that carried writes to `keys`: the one Redis, or in a cluster the connection
 * to the master of each key's slot (WAIT and WAITAOF cover what was written on the connection
 * they are sent on). A slot whose master the client does not know fails the confirmation.
 */
function writersOf(redis: RedisClient, keys: readonly string[]): Redis[] {
  if (!(redis instanceof Cluster)) return [redis];
  const byAddress = new Map(mastersOf(redis).map((node) => [`${node.options.host}:${node.options.port}`, node]));
  const writers = new Set<Redis>();
  for (const key of keys) {
    const master = byAddress.get(redis.slots[calculateSlot(key)]?.[0] ?? '');
    if (!master) throw new NotDurableError(`no known master holds the slot of ${key}`);
    writers.add(master);
  }
  return [...writers];
}

/**
 * Waits until what was written to `keys` is as durable as asked, or `timeoutMs`; throws
 * {@link NotDurableError} short of it. WAIT and WAITAOF cover every write the connection made
 * before them, so one call per master confirms every job a publication added there.
 */
export async function confirmDurable(
  redis: RedisClient,
  durability: Durability,
  timeoutMs: number,
  keys: readonly string[],
): Promise<void> {
  if (durability === 'none') return;
  await Promise.all(
    writersOf(redis, keys).map(async (writer) => {
      if (durability === 'replica') {
        const replicas = Number(await writer.call('WAIT', 1, timeoutMs));
        if (replicas < 1) throw new NotDurableError(`no replica acknowledged the publication within ${timeoutMs} ms`);
      } else {
        const [local] = (await writer.call('WAITAOF', 1, 0, timeoutMs)) as number[];
        if (!local) throw new NotDurableError(`Redis did not write the publication to its disk within ${timeoutMs} ms`);
      }
    }),
  );
}

/**
 * Confirms writes as durably as `asked`: `auto` resolved on the first write, once Redis can say
 * whether it has a replica (asked again after a failure). What a publisher waits for after its
 * jobs are added, before the publication counts as published.
 */
export function durableWrites(
  redis: RedisClient,
  asked: (typeof DURABILITIES)[number],
  timeoutMs: number,
): { resolved(): Promise<Durability>; confirm(keys: readonly string[]): Promise<void> } {
  let durability: Promise<Durability> | undefined;
  const resolved = () =>
    (durability ??= resolveDurability(redis, asked).catch((error: unknown) => {
      durability = undefined;
      throw error;
    }));
  return { resolved, confirm: async (keys) => confirmDurable(redis, await resolved(), timeoutMs, keys) };
}
