import { faultsFromEnv, type Faults } from '@idem/faults';
import { shop } from '@idem/shop';
import { api, createLogger, faultSwitches, gauges, runService, worker, type RunningService } from '@idem/runtime';
import { REFUSED_CAPTURES_HELP, refusedCaptures } from './application/captures.js';
import { orderApiSettings, type OrdersConfig } from './config.js';
import { handlePaymentCaptured } from './consumers/payment-captured.js';
import { handlePaymentFailed } from './consumers/payment-failed.js';
import { handlePaymentRefunded } from './consumers/payment-refunded.js';
import { handleReservationExpired } from './consumers/reservation-expired.js';
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
  const running = await runService({
    catalogue: shop,
    name: 'orders',
    config,
    log,
    db,
    faults,
    now,
    consumers: {
      'orders.stock-reserved.v1': handleStockReserved({ now }),
      'orders.stock-rejected.v1': handleStockRejected({ now }),
      'orders.payment-captured.v1': handlePaymentCaptured({ now }),
      'orders.payment-failed.v1': handlePaymentFailed({ now }),
      'orders.payment-refunded.v1': handlePaymentRefunded({ now }),
      'orders.reservation-expired.v1': handleReservationExpired({ now }),
    },
    outbox: true,
    parts: [
      worker('idempotency key cleanup', () =>
        createIdempotencyKeyCleanup({ db, now, intervalMs: config.MAINTENANCE_INTERVAL_MS, log }),
      ),
      api('orders API', (app, { redis, operators }) =>
        orderRoutes(app, { db, now, operators, redis, ...orderApiSettings(config) }),
      ),
      gauges(({ metrics }) =>
        metrics.gauge('idem_orders_refused_captures', REFUSED_CAPTURES_HELP, ['refusal'], () => refusedCaptures(db)),
      ),
      api('catalog API', (app, { operators }) => catalogRoutes(app, { db, operators, now })),
      faultSwitches(),
    ],
  });
  return { ...running, db };
}
