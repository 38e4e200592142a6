import { operatorTokensProblem } from '@idem/http';
import { DURABILITIES, isRedisUrl } from '@idem/messaging';
import { POOLED_RELAY_CONCURRENCY } from '@idem/outbox';
import { z } from 'zod';

const DAY = 24 * 3_600_000;

/** Fails fast, naming every bad variable, instead of starting half-configured. */
export class ConfigError extends Error {
  readonly code = 'config_invalid';
}

/**
 * How many failed authentications every service answers before a further one gets 429 (each in
 * RATE_LIMIT_WINDOW_MS); a valid token is never refused for them, and a request with no token
 * counts against nobody (docs/operations.md "Who may call what").
 */
const FAILED_AUTHENTICATION_LIMITS = {
  /** Per client address: a customer token that does not verify, a wrong operator token. */
  RATE_LIMIT_FAILED_AUTHENTICATIONS_PER_ADDRESS: z.coerce.number().int().positive().default(20),
  /** Per customer a forged token (its signature does not verify) claims to be, from any address. */
  RATE_LIMIT_FAILED_AUTHENTICATIONS_PER_CUSTOMER: z.coerce.number().int().positive().default(20),
};

/** The variables every service reads (see docs/operations.md "Configuration"). */
export function baseConfigSchema(service: string, defaultPort: number) {
  return z.object({
    DATABASE_URL: z.url().default(`postgresql://postgres@127.0.0.1:5432/${service}`),
    /** One Redis (`redis://…`), or a Redis Cluster (`redis+cluster://host:port[,host:port…]`). */
    REDIS_URL: z
      .string()
      .refine(isRedisUrl, 'a redis:// URL, or redis+cluster://[user:password@]host:port[,host:port…]')
      .default('redis://127.0.0.1:6379'),
    /** Connections in this process's database pool (interactive transactions each hold one). */
    DATABASE_POOL_MAX: z.coerce.number().int().positive().default(10),
    PORT: z.coerce.number().int().min(0).max(65535).default(defaultPort),
    /**
     * The address the HTTP server binds. Loopback unless told otherwise: a process started on a
     * developer's machine serves that machine only. The images set 0.0.0.0 (a container is
     * reached over its own network; compose publishes its ports on 127.0.0.1).
     */
    HOST: z.string().min(1).default('127.0.0.1'),
    /**
     * Which proxies in front of the service to believe about the client's address
     * (X-Forwarded-For), as express's `trust proxy` takes it: a number of hops, or addresses and
     * CIDR ranges (`10.0.0.0/8,loopback`). Unset: none, and every client behind an ingress shares
     * the ingress's address (and its rate limits). Never `true`: a client could then claim any
     * address. @defaultValue unset
     */
    TRUST_PROXY: z
      .string()
      .regex(/^(\d+|[\w.:/]+(\s*,\s*[\w.:/]+)*)$/, 'a number of hops, or addresses and CIDR ranges separated by commas')
      .refine((value) => value !== 'true', 'trusting every hop lets any client claim any address: name the proxies')
      .transform((value) => (/^\d+$/.test(value) ? Number(value) : value.split(',').map((part) => part.trim())))
      .optional(),
    /** One operator token (the operator named `operator`); or ADMIN_TOKENS, or both. */
    ADMIN_TOKEN: z.string().min(16, 'use at least 16 characters').optional(),
    /** Named operators, `name:token,…`, each token at least 16 characters: the audit trail names who acted. */
    ADMIN_TOKENS: z
      .string()
      .optional()
      .superRefine((value, ctx) => {
        const problem = value === undefined ? undefined : operatorTokensProblem(value);
        if (problem) ctx.addIssue({ code: 'custom', message: problem });
      }),
    /**
     * A token that opens this process's fault switches (/faults) and nothing else, and only where
     * IDEM_FAULTS_ENABLED=1: what compose's workers hold instead of the operator token, so the
     * console can set their switches while their credentials reach no operator action.
     */
    FAULTS_TOKEN: z.string().min(16, 'use at least 16 characters').optional(),
    /** Roles this process runs; the native run and compose run them all in one process. */
    IDEM_ROLES: z
      .string()
      .default('http,consumers,relay,workers')
      .transform((roles) => new Set(roles.split(',').map((r) => r.trim())))
      .pipe(z.set(z.enum(['http', 'consumers', 'relay', 'workers']))),
    /** BullMQ key prefix, so several systems (or test runs) can share one Redis. */
    IDEM_QUEUE_PREFIX: z.string().min(1).default('idem'),
    CONSUMER_CONCURRENCY: z.coerce.number().int().positive().default(8),
    CONSUMER_LOCK_MS: z.coerce.number().int().positive().default(30_000),
    CONSUMER_STALLED_INTERVAL_MS: z.coerce.number().int().positive().default(30_000),
    /** How long processed-message records are kept; must cover the replay horizon (README). */
    INBOX_RETENTION_MS: z.coerce
      .number()
      .int()
      .positive()
      .default(15 * DAY),
    /**
     * The span of message times one partition of processed_messages covers; retention drops a
     * partition whole once every record in it is past INBOX_RETENTION_MS (docs/operations.md).
     */
    INBOX_PARTITION_SPAN_MS: z.coerce.number().int().min(60_000).default(DAY),
    /** How long after the fact dead letters may still be replayed or events republished. */
    REPLAY_WINDOW_MS: z.coerce
      .number()
      .int()
      .nonnegative()
      .default(7 * DAY),
    /** How long published outbox rows are kept. */
    OUTBOX_RETENTION_MS: z.coerce
      .number()
      .int()
      .positive()
      .default(7 * DAY),
    /**
     * Batches the relay keeps in flight, each a transaction on a connection of the relay's own
     * pool (up to this many connections, besides DATABASE_POOL_MAX): while one batch waits for
     * Redis the next is claimed, and a broker outage holds the relay's connections, never the API's.
     */
    RELAY_CONCURRENCY: z.coerce.number().int().positive().default(POOLED_RELAY_CONCURRENCY),
    /**
     * What the relay waits for before it marks a row published: `replica` (a replica has the jobs,
     * WAIT), `disk` (Redis wrote them to its disk, WAITAOF, Redis 7.2+), `none`, or `auto` —
     * `replica` where Redis has one, else `none`. A publication short of it is published again.
     */
    RELAY_DURABILITY: z.enum(DURABILITIES).default('auto'),
    /** How long a publication waits for that before it counts as failed. */
    RELAY_DURABILITY_TIMEOUT_MS: z.coerce.number().int().positive().default(1000),
    ...FAILED_AUTHENTICATION_LIMITS,
    /** The window every rate limit counts in. */
    RATE_LIMIT_WINDOW_MS: z.coerce.number().int().positive().default(60_000),
    /**
     * Record every delivery, publication and provider call in the delivery journal (a capped Redis
     * stream the teaching console reads): a development aid, off unless asked for — the native run
     * and compose turn it on; it costs Redis writes per delivery.
     */
    DELIVERY_JOURNAL: z.stringbool().default(false),
    /** How often retention cleanups run. */
    MAINTENANCE_INTERVAL_MS: z.coerce.number().int().positive().default(60_000),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  });
}

export type BaseConfig = z.infer<ReturnType<typeof baseConfigSchema>>;

/** Parses the environment; a variable set to the empty string counts as unset (as compose sets `VAR: ${VAR:-}`). */
export function parseConfig<S extends z.ZodType>(schema: S, env: NodeJS.ProcessEnv): z.infer<S> {
  const result = schema.safeParse(Object.fromEntries(Object.entries(env).filter(([, value]) => value !== '')));
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
  throw new ConfigError(`invalid configuration:\n  ${problems.join('\n  ')}`);
}
