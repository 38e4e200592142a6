import { createHash } from 'node:crypto';
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

function limiterOf(
  redis: Redis | Cluster,
  prefix: string,
  limit: Pick<RateLimit, 'per' | 'points' | 'windowMs'>,
): RateLimiterRedis {
  const window = { points: limit.points, duration: Math.max(1, Math.ceil(limit.windowMs / 1000)) };
  return new RateLimiterRedis({
    ...window,
    storeClient: redis,
    keyPrefix: `${prefix}:${limit.per}`,
    insuranceLimiter: new RateLimiterMemory(window),
  });
}

function rateLimited(
  limit: Pick<RateLimit, 'per' | 'points' | 'windowMs'>,
  state: RateLimiterRes,
  what: string,
): HttpError {
  return new HttpError(
    'rate_limited',
    `at most ${limit.points} ${what} per ${limit.windowMs / 1000} s per ${limit.per}; retry later`,
    { headers: { 'Retry-After': String(Math.max(1, Math.ceil(state.msBeforeNext / 1000))) } },
  );
}

/**
 * Limits failed authentications — a customer token that does not verify, an operator token that
 * is wrong — on every route of an app that checks credentials: per client address, and per
 * customer a forged token claims to be (from any address). Past a limit a further failure is
 * answered 429 instead of 401 or 403, until the window ends. Only failures are counted, and only
 * failures are refused: a credential that verifies is answered on its merits whatever else came
 * from its address, and a request with no credential at all is a plain 401 that counts against
 * nobody. So no stranger can fill a counter that stands between a caller and a right token — the
 * tokens are high-entropy, so a lockout would protect nothing, and would stop everyone who shares
 * the address. The limit is a signal, not a shield: it tells a client that keeps failing to stop
 * (429, Retry-After) and shows who fails; it neither slows a guesser (a right token is answered)
 * nor saves the check that found the failure. `requireOperator` and `authenticate` report failures
 * to it (`failedToAuthenticate`).
 */
export function limitFailedAuthentications({
  redis,
  prefix,
  perAddress,
  perCustomer,
  windowMs,
}: {
  redis: Redis | Cluster;
  prefix: string;
  /** Failures allowed per client address in each window. */
  perAddress: number;
  /** Failures allowed per customer that forged tokens claim to be, in each window. */
  perCustomer: number;
  windowMs: number;
}): RequestHandler {
  const byAddress = { per: 'address', points: perAddress, windowMs };
  const byCustomer = { per: 'claimed customer', points: perCustomer, windowMs };
  const limiters = {
    address: limiterOf(redis, `${prefix}:failed-authentications`, byAddress),
    customer: limiterOf(redis, `${prefix}:failed-authentications`, byCustomer),
  };
  return (req, res, next) => {
    const consume = async (limiter: RateLimiterRedis, key: string, limit: typeof byAddress) => {
      try {
        await limiter.consume(key);
      } catch (error) {
        throw error instanceof RateLimiterRes ? rateLimited(limit, error, 'failed authentications') : error;
      }
    };
    const count: FailureCount = {
      failed: async (claimed) => {
        await consume(limiters.address, addressOf(req), byAddress);
        // Only within its address's limit does a forged token count against the customer it
        // claims (a digest of the claim, of any length and content): an address past its limit
        // writes no more keys, however many customers its tokens name.
        if (claimed !== undefined) await consume(limiters.customer, digestOf(claimed), byCustomer);
      },
    };
    res.locals.failureCount = count;
    next();
  };
}

const digestOf = (value: string) => createHash('sha256').update(value).digest('base64url');
