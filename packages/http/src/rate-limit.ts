import type { Request, RequestHandler, Response } from 'express';
import type { Cluster, Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { addressOf } from './callers.js';
import { HttpError } from './errors.js';
import type { FailureCount } from './operators.js';

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
  /** The counters' keys' prefix: a service's own (@idem/messaging's `rateLimitPrefix`), which its Redis user alone may write. */
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
 * Limits failures rather than requests, e.g. failed authentications per address, so nobody can
 * guess tokens at the speed of the network. The route reports its verdict before it answers
 * (`failedToAuthenticate`, `passedAuthentication`): a failure is counted atomically as it
 * happens, and once `points` failures are counted in the window every verdict — a right guess's
 * too — is a 429. So guesses sent all at once learn nothing past the limit: each is told "wrong"
 * only while its own failure is within it, and a right one is let through only while the count is
 * under it. Requests that check no credentials are not limited.
 */
export function limitFailures({
  redis,
  prefix,
  limit,
}: {
  redis: Redis | Cluster;
  prefix: string;
  limit: RateLimit;
}): RequestHandler {
  const limiter = limiterOf(redis, prefix, limit);
  return (req, res, next) => {
    const key = limit.keyOf(req, res);
    const count: FailureCount = {
      failed: async () => {
        try {
          await limiter.consume(key);
        } catch (rejection) {
          if (!(rejection instanceof RateLimiterRes)) throw rejection;
          throw rateLimited(limit, rejection, 'failed requests');
        }
      },
      passed: async () => {
        const spent = await limiter.get(key);
        if (spent && spent.consumedPoints >= limit.points) throw rateLimited(limit, spent, 'failed requests');
      },
    };
    res.locals.failureCount = count;
    next();
  };
}

function limiterOf(redis: Redis | Cluster, prefix: string, limit: RateLimit): RateLimiterRedis {
  const window = { points: limit.points, duration: Math.max(1, Math.ceil(limit.windowMs / 1000)) };
  return new RateLimiterRedis({
    ...window,
    storeClient: redis,
    keyPrefix: `${prefix}:${limit.per}`,
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
 * verify, an operator token that is wrong or missing — on every route of an app that checks
 * credentials: past `points` such failures in the window it gets 429, whatever it sends, until the
 * window ends. `requireOperator` and `authenticate` report their verdicts to it.
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
  });
}
