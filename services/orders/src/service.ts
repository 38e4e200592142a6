import { faultsFromEnv, type Faults } from '@idem/faults';
import { createInbox } from '@idem/inbox';
import {
  api,
  consumer,
  consumers,
  createLogger,
  deadLetters,
  faultSwitches,
  inboxRetention,
  outbox,
  runService,
  worker,
  type RunningService,
} from '@idem/runtime';
import { seedDemoCatalog } from './application/catalog.js';
import type { OrdersConfig } from './config.js';
import { handlePaymentCaptured } from './consumers/payment-captured.js';
import { handlePaymentFailed } from './consumers/payment-failed.js';
import { handlePaymentRefunded } from './consumers/payment-refunded.js';
import { handleStockRejected } from './consumers/stock-rejected.js';
import { handleStockReserved } from './consumers/stock-reserved.js';
import { connectDatabase, type PrismaClient } from './db.js';
import { catalogRoutes } from './http/catalog.js';
import { orderRoutes } from './http/routes.js';
import { createIdempotencyKeyCleanup } from './workers/idempotency-key-cleanup.js';

/** Builds and starts the orders service: the composition root, shared by main.ts and tests. */
export async function startOrders(
  config: OrdersConfig,
  { faults = faultsFromEnv(), now = () => new Date() }: { faults?: Faults; now?: () => Date } = {},
): Promise<RunningService & { db: PrismaClient }> {
  const log = createLogger('orders', config.LOG_LEVEL);
  const db = connectDatabase(config.DATABASE_URL, config.DATABASE_POOL_MAX);
  await seedDemoCatalog(db, now());
  const inbox = createInbox({ db, faults, now });
  const running = await runService({
    name: 'orders',
    config,
    log,
    db,
    faults,
    parts: [
      outbox(),
      inboxRetention(),
      worker('idempotency key cleanup', () =>
        createIdempotencyKeyCleanup({ db, now, intervalMs: config.MAINTENANCE_INTERVAL_MS, log }),
      ),
      consumers(inbox, [
        consumer('orders.stock-reserved.v1', handleStockReserved({ now })),
        consumer('orders.stock-rejected.v1', handleStockRejected({ now })),
        consumer('orders.payment-captured.v1', handlePaymentCaptured({ now })),
        consumer('orders.payment-failed.v1', handlePaymentFailed({ now })),
        consumer('orders.payment-refunded.v1', handlePaymentRefunded({ now })),
      ]),
      api('orders API', (app, { redis, operators }) =>
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
          operators,
          redis,
          rateLimits: {
            prefix: config.IDEM_QUEUE_PREFIX,
            perCustomer: config.RATE_LIMIT_ORDERS_PER_CUSTOMER,
            perAddress: config.RATE_LIMIT_ORDERS_PER_ADDRESS,
            cancelsPerCustomer: config.RATE_LIMIT_CANCELS_PER_CUSTOMER,
            failedAuthenticationsPerAddress: config.RATE_LIMIT_FAILED_AUTHENTICATIONS_PER_ADDRESS,
            windowMs: config.RATE_LIMIT_WINDOW_MS,
          },
        }),
      ),
      api('catalog API', (app, { operators }) => catalogRoutes(app, { db, operators, now })),
      deadLetters(inbox),
      faultSwitches(),
    ],
  });
  return { ...running, db };
}
