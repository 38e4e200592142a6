import type { Request, RequestHandler, Response } from 'express';
import type { Cluster, Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { addressOf } from './callers.js';
import { HttpError } from './errors.js';

export interface RateLimit {
  /** What is limited, e.g. `customer`: part of the Redis key and of the 429's detail. */
  readonly per: string;
  /** Requests allowed per window and key. */
  readonly points: number;
  readonly windowMs: number;
  readonly keyOf: (req: Request, res: Response) => string;
}

/**
 * Limits requests per key (customer, address, ...) in windows counted in Redis, so every
 * instance of a service counts together. Past a limit it answers 429 with `Retry-After`.
 * While Redis is unreachable each instance counts on its own (rate-limiter-flexible's
 * insurance limiter) rather than refusing every request.
 */
export function rateLimit({
  redis,
  prefix,
  limits,
}: {
  redis: Redis | Cluster;
  prefix: string;
  limits: readonly RateLimit[];
}): RequestHandler {
  const limiters = limits.map((limit) => ({ limit, limiter: limiterOf(redis, prefix, limit) }));
  return async (req, res, next) => {
    for (const { limit, limiter } of limiters) {
      try {
        await limiter.consume(limit.keyOf(req, res));
      } catch (rejection) {
        if (!(rejection instanceof RateLimiterRes)) throw rejection;
        throw rateLimited(limit, rejection, 'requests');
      }
    }
    next();
  };
}

/**
 * Limits failures rather than requests: a request is refused with 429 once its key has had
 * `points` answers that `failed` in the window (e.g. 401s per address, so nobody can guess tokens
 * at the speed of the network), and counts only when it fails itself. Other requests are free.
 */
export function limitFailures({
  redis,
  prefix,
  limit,
  failed,
}: {
  redis: Redis | Cluster;
  prefix: string;
  limit: RateLimit;
  failed: (res: Response) => boolean;
}): RequestHandler {
  const limiter = limiterOf(redis, prefix, limit);
  return async (req, res, next) => {
    const key = limit.keyOf(req, res);
    const spent = await limiter.get(key);
    if (spent && spent.consumedPoints >= limit.points) throw rateLimited(limit, spent, 'failed requests');
    res.on('finish', () => {
      if (failed(res)) limiter.penalty(key).catch(() => {}); // counted for the next request
    });
    next();
  };
}

function limiterOf(redis: Redis | Cluster, prefix: string, limit: RateLimit): RateLimiterRedis {
  const window = { points: limit.points, duration: Math.max(1, Math.ceil(limit.windowMs / 1000)) };
  return new RateLimiterRedis({
    ...window,
    storeClient: redis,
    keyPrefix: `${prefix}:rate-limit:${limit.per}`,
    insuranceLimiter: new RateLimiterMemory(window),
  });
}

function rateLimited(limit: RateLimit, state: RateLimiterRes, what: string): HttpError {
  return new HttpError(
    'rate_limited',
    `at most ${limit.points} ${what} per ${limit.windowMs / 1000} s per ${limit.per}; retry later`,
    { headers: { 'Retry-After': String(Math.max(1, Math.ceil(state.msBeforeNext / 1000))) } },
  );
}

/**
 * Stops an address whose requests keep failing to authenticate — a customer token that does not
 * verify, an operator token that is wrong or missing — on every route of an app: past `points`
 * such failures in the window it gets 429, whatever it sends, until the window ends.
 */
export function limitFailedAuthentications({
  redis,
  prefix,
  points,
  windowMs,
}: {
  redis: Redis | Cluster;
  prefix: string;
  points: number;
  windowMs: number;
}): RequestHandler {
  return limitFailures({
    redis,
    prefix,
    limit: { per: 'address (failed authentications)', points, windowMs, keyOf: addressOf },
    failed: (res) => (res.locals as { authenticationFailed?: boolean }).authenticationFailed === true,
  });
}
