import type { Redis } from 'ioredis';

/**
 * What "published" means before the relay marks a row: Redis took the jobs (`none`), a replica
 * has them too (`replica`, `WAIT 1`), or Redis wrote them to its own disk (`disk`, `WAITAOF 1 0`,
 * Redis 7.2 and later). `auto` is `replica` when the server has a replica when the publisher
 * first publishes, `none` when it has none. A master that dies right after acknowledging a write
 * it had not passed on takes the jobs with it: only a publication confirmed at the chosen level
 * is marked, and one that is not is published again (docs/failure-windows.md).
 */
export type Durability = 'none' | 'replica' | 'disk';
export const DURABILITIES = ['auto', 'none', 'replica', 'disk'] as const;

/** The publication reached Redis but not the durability asked for: the relay publishes it again. */
export class NotDurableError extends Error {}

/** `auto` resolved against the server: `replica` where one is connected, else `none`. */
export async function resolveDurability(redis: Redis, asked: (typeof DURABILITIES)[number]): Promise<Durability> {
  if (asked !== 'auto') return asked;
  const replication = await redis.info('replication');
  return Number(/^connected_slaves:(\d+)/m.exec(replication)?.[1] ?? 0) > 0 ? 'replica' : 'none';
}

/**
 * Waits until what this connection wrote is as durable as asked, or `timeoutMs`; throws
 * {@link NotDurableError} short of it. WAIT and WAITAOF cover every write the connection made
 * before them, so one call confirms every job a publication added on it.
 */
export async function confirmDurable(redis: Redis, durability: Durability, timeoutMs: number): Promise<void> {
  if (durability === 'replica') {
    const replicas = Number(await redis.call('WAIT', 1, timeoutMs));
    if (replicas < 1) throw new NotDurableError(`no replica acknowledged the publication within ${timeoutMs} ms`);
  } else if (durability === 'disk') {
    const [local] = (await redis.call('WAITAOF', 1, 0, timeoutMs)) as number[];
    if (!local) throw new NotDurableError(`Redis did not write the publication to its disk within ${timeoutMs} ms`);
  }
}
