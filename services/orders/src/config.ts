import { DEFAULT_TOKEN_CLAIMS, DEVELOPMENT_JWT_SECRET, isLoopbackAddress } from '@idem/http';
import { rateLimitPrefix } from '@idem/messaging';
import { baseConfigSchema, parseConfig } from '@idem/runtime';
import { z } from 'zod';

const perWindow = z.coerce.number().int().positive();

export const configSchema = baseConfigSchema('orders', 3001)
  .extend({
    /** How long an Idempotency-Key and its stored response are kept. @defaultValue 24 h */
    IDEMPOTENCY_KEY_RETENTION_MS: z.coerce
      .number()
      .int()
      .positive()
      .default(24 * 3_600_000),
    /** HS256 key that customer tokens are signed with (`pnpm token` mints one). Or JWT_JWKS_URL. */
    JWT_SECRET: z.string().min(32, 'use at least 32 characters').optional(),
    /**
     * An identity provider's key set (RS256, ES256, EdDSA tokens), instead of JWT_SECRET. Over
     * https: whoever can change the keys on the way can sign any customer's token (loopback
     * excepted, for a provider on this machine).
     */
    JWT_JWKS_URL: z
      .url()
      .refine(
        (url) => new URL(url).protocol === 'https:' || isLoopbackAddress(new URL(url).hostname.replace(/^\[|\]$/g, '')),
        {
          message: 'use https (only a key set on this machine, 127.0.0.1 or localhost, may be plain http)',
        },
      )
      .optional(),
    JWT_ISSUER: z.string().min(1).default(DEFAULT_TOKEN_CLAIMS.issuer),
    JWT_AUDIENCE: z.string().min(1).default(DEFAULT_TOKEN_CLAIMS.audience),
    /**
     * Whether a token's `email` needs an `email_verified: true` beside it (docs/operations.md: which
     * identity providers send it). A claim that is present must be true either way.
     */
    JWT_REQUIRE_EMAIL_VERIFIED: z.stringbool().default(true),
    /** `POST /orders` allowed per customer, and per client address, in each RATE_LIMIT_WINDOW_MS. */
    RATE_LIMIT_ORDERS_PER_CUSTOMER: perWindow.default(30),
    RATE_LIMIT_ORDERS_PER_ADDRESS: perWindow.default(300),
    /** `POST /orders/:id/cancel` allowed per caller in each RATE_LIMIT_WINDOW_MS. */
    RATE_LIMIT_CANCELS_PER_CUSTOMER: perWindow.default(30),
  })
  .refine((config) => !(config.JWT_SECRET && config.JWT_JWKS_URL), {
    path: ['JWT_JWKS_URL'],
    message: 'set JWT_SECRET or JWT_JWKS_URL, not both: tokens are checked against one issuer',
  })
  // Anyone who can read this repository can sign tokens with the development key: it may serve
  // this machine, never a network.
  .refine((config) => config.JWT_SECRET !== DEVELOPMENT_JWT_SECRET || isLoopbackAddress(config.HOST), {
    path: ['JWT_SECRET'],
    message:
      'this is the public development key, and HOST binds beyond this machine: anyone could sign a customer token; set a JWT_SECRET of your own',
  });
export type OrdersConfig = ReturnType<typeof loadConfig>;

export function loadConfig(env: NodeJS.ProcessEnv = process.env) {
  return parseConfig(configSchema, env);
}

/** What the orders API takes from the configuration: who may call it, and how often. */
export function orderApiSettings(config: OrdersConfig) {
  return {
    idempotencyKeyRetentionMs: config.IDEMPOTENCY_KEY_RETENTION_MS,
    tokens: {
      ...(config.JWT_SECRET ? { secret: config.JWT_SECRET } : {}),
      ...(config.JWT_JWKS_URL ? { jwksUrl: config.JWT_JWKS_URL } : {}),
      issuer: config.JWT_ISSUER,
      audience: config.JWT_AUDIENCE,
      requireEmailVerified: config.JWT_REQUIRE_EMAIL_VERIFIED,
    },
    rateLimits: {
      prefix: rateLimitPrefix(config.IDEM_QUEUE_PREFIX, 'orders'),
      perCustomer: config.RATE_LIMIT_ORDERS_PER_CUSTOMER,
      perAddress: config.RATE_LIMIT_ORDERS_PER_ADDRESS,
      cancelsPerCustomer: config.RATE_LIMIT_CANCELS_PER_CUSTOMER,
      windowMs: config.RATE_LIMIT_WINDOW_MS,
    },
  } as const;
}
