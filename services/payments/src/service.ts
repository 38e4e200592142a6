import { faultsFromEnv, type Faults } from '@idem/faults';
import { createInbox } from '@idem/inbox';
import { consumer, createLogger, journalFor, runService, type RunningService } from '@idem/runtime';
import type { PaymentsConfig } from './config.js';
import { handleOrderCancelled } from './consumers/order-cancelled.js';
import { handleStockReserved } from './consumers/stock-reserved.js';
import { connectDatabase, type PrismaClient } from './db.js';
import { paymentRoutes } from './http/routes.js';
import { createPaymentWorker } from './payment-worker.js';
import { createStripeClient } from './stripe.js';

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
  const journal = journalFor(config); // deliveries and the worker's provider calls
  log.info(
    { provider: config.PAYMENT_PROVIDER, apiBase: config.STRIPE_API_BASE ?? 'https://api.stripe.com' },
    'payment provider',
  );
  const running = await runService({
    name: 'payments',
    config,
    log,
    db,
    faults,
    inbox: createInbox({ db, faults, now }),
    publishes: true,
    journal,
    consumers: [
      consumer('payments.stock-reserved.v1', handleStockReserved({ now })),
      consumer('payments.order-cancelled.v1', handleOrderCancelled({ now })),
    ],
    workers: [
      createPaymentWorker({
        db,
        stripe,
        log,
        now,
        faults,
        journal,
        leaseMs: config.PAYMENT_WORKER_LEASE_MS,
        pollIntervalMs: config.PAYMENT_WORKER_POLL_MS,
        retryDelayMs: config.PAYMENT_RETRY_DELAY_MS,
      }),
    ],
    routes: (app) => paymentRoutes(app, { db, adminToken: config.ADMIN_TOKEN, now }),
    metrics: (metrics) =>
      metrics.gauge('idem_payment_attempts', 'Payment attempts by status.', ['status'], async () =>
        (await db.paymentAttempt.groupBy({ by: ['status'], _count: true })).map((g) => ({
          labels: { status: g.status },
          value: g._count,
        })),
      ),
  });
  return { ...running, db };
}
