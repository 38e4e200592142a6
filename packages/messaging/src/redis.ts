import { Redis } from 'ioredis';

/** Where BullMQ keeps its queues; a distinct prefix isolates a test run or a tenant. */
export interface BrokerOptions {
  /** @defaultValue process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' */
  readonly redisUrl?: string;
  /** BullMQ key prefix. @defaultValue 'idem' */
  readonly prefix?: string;
}

export function resolveBroker(options: BrokerOptions = {}): Required<BrokerOptions> {
  return {
    redisUrl: options.redisUrl ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    prefix: options.prefix ?? 'idem',
  };
}

/**
 * Workers block on Redis and must retry forever (BullMQ requires maxRetriesPerRequest: null).
 * Producers must fail fast instead, so a relay notices a broker outage and backs off.
 */
export function createRedis(redisUrl: string, role: 'worker' | 'producer'): Redis {
  return role === 'worker'
    ? new Redis(redisUrl, { maxRetriesPerRequest: null })
    : new Redis(redisUrl, { maxRetriesPerRequest: 1, enableOfflineQueue: false });
}
