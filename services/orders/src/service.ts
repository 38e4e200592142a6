import { faultsFromEnv, type Faults } from '@idem/faults';
import { createInbox } from '@idem/inbox';
import { consumer, createLogger, periodic, runService, type RunningService } from '@idem/runtime';
import type { OrdersConfig } from './config.js';
import { transitionOn } from './consumers/order-transitions.js';
import { connectDatabase, type PrismaClient } from './db.js';
import { purgeExpiredKeys } from './http/idempotency.js';
import { orderRoutes } from './http/routes.js';

/** Builds and starts the orders service: the composition root, shared by main.ts and tests. */
export async function startOrders(
  config: OrdersConfig,
  { faults = faultsFromEnv(), now = () => new Date() }: { faults?: Faults; now?: () => Date } = {},
): Promise<RunningService & { db: PrismaClient }> {
  const log = createLogger('orders', config.LOG_LEVEL);
  const db = connectDatabase(config.DATABASE_URL, config.DATABASE_POOL_MAX);
  const running = await runService({
    name: 'orders',
    config,
    log,
    db,
    faults,
    inbox: createInbox({ db, faults, now }),
    publishes: true,
    consumers: [
      consumer('orders.stock-reserved.v1', transitionOn('stock-reserved', { now })),
      consumer('orders.stock-rejected.v1', transitionOn('stock-rejected', { now })),
      consumer('orders.payment-captured.v1', transitionOn('payment-captured', { now })),
      consumer('orders.payment-failed.v1', transitionOn('payment-failed', { now })),
      consumer('orders.payment-refunded.v1', transitionOn('payment-refunded', { now })),
    ],
    workers: [
      periodic('idempotency key cleanup', config.MAINTENANCE_INTERVAL_MS, () => purgeExpiredKeys(db, now()), log),
    ],
    routes: (app, { redis }) =>
      orderRoutes(app, {
        db,
        now,
        idempotencyKeyRetentionMs: config.IDEMPOTENCY_KEY_RETENTION_MS,
        tokens: {
          ...(config.JWT_SECRET ? { secret: config.JWT_SECRET } : {}),
          ...(config.JWT_JWKS_URL ? { jwksUrl: config.JWT_JWKS_URL } : {}),
          issuer: config.JWT_ISSUER,
          audience: config.JWT_AUDIENCE,
        },
        adminToken: config.ADMIN_TOKEN,
        redis,
        rateLimits: {
          prefix: config.IDEM_QUEUE_PREFIX,
          perCustomer: config.RATE_LIMIT_ORDERS_PER_CUSTOMER,
          perAddress: config.RATE_LIMIT_ORDERS_PER_ADDRESS,
          windowMs: config.RATE_LIMIT_WINDOW_MS,
        },
      }),
  });
  return { ...running, db };
}
