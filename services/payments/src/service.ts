import { faultsFromEnv, type Faults } from '@idem/faults';
import { shop } from '@idem/shop';
import { api, createLogger, faultSwitches, gauges, runService, worker, type RunningService } from '@idem/runtime';
import { createPaymentWorker } from './workers/payment-worker.js';
import type { PaymentsConfig } from './config.js';
import { handleOrderCancelled } from './consumers/order-cancelled.js';
import { handleStockReserved } from './consumers/stock-reserved.js';
import { connectDatabase, type PrismaClient } from './db.js';
import { paymentRoutes } from './http/routes.js';
import { createStripeClient } from './providers/stripe.js';

/** Builds and starts the payments service: the composition root, shared by main.ts and tests. */
export async function startPayments(
  config: PaymentsConfig,
  { faults = faultsFromEnv(), now = () => new Date() }: { faults?: Faults; now?: () => Date } = {},
): Promise<RunningService & { db: PrismaClient }> {
  const log = createLogger('payments', config.LOG_LEVEL);
  const db = connectDatabase(config.DATABASE_URL, config.DATABASE_POOL_MAX);
  const stripe = createStripeClient({
    apiKey: config.STRIPE_API_KEY,
    apiBase: config.STRIPE_API_BASE,
    timeoutMs: config.STRIPE_TIMEOUT_MS,
  });
  log.info(
    { provider: config.PAYMENT_PROVIDER, apiBase: config.STRIPE_API_BASE ?? 'https://api.stripe.com' },
    'payment provider',
  );
  const running = await runService({
    catalogue: shop,
    name: 'payments',
    config,
    log,
    db,
    faults,
    now,
    consumers: {
      'payments.stock-reserved.v1': handleStockReserved({ now }),
      'payments.order-cancelled.v1': handleOrderCancelled({ now }),
    },
    outbox: true,
    parts: [
      // The worker journals its provider calls beside the deliveries.
      worker('payment worker', ({ journal }) =>
        createPaymentWorker({
          db,
          stripe,
          log,
          now,
          faults,
          journal,
          databaseUrl: config.DATABASE_URL,
          leaseMs: config.PAYMENT_WORKER_LEASE_MS,
          pollIntervalMs: config.PAYMENT_WORKER_POLL_MS,
          retryDelayMs: config.PAYMENT_RETRY_DELAY_MS,
          searchLagMs: config.PROVIDER_SEARCH_LAG_MS,
        }),
      ),
      gauges(({ metrics }) =>
        metrics.gauge('idem_payment_attempts', 'Payment attempts by status.', ['status'], async () =>
          (await db.paymentAttempt.groupBy({ by: ['status'], _count: true })).map((g) => ({
            labels: { status: g.status },
            value: g._count,
          })),
        ),
      ),
      api('payments API', (app, { operators }) => paymentRoutes(app, { db, operators, now })),
      faultSwitches(),
    ],
  });
  return { ...running, db };
}
