import { faultsFromEnv, type Faults } from '@idem/faults';
import { shop } from '@idem/shop';
import { api, createLogger, faultSwitches, gauges, runService, worker, type RunningService } from '@idem/runtime';
import { createDispatcher } from './workers/dispatcher.js';
import type { NotificationsConfig } from './config.js';
import { handleOrderPlaced } from './consumers/order-placed.js';
import { handlePaymentCaptured } from './consumers/payment-captured.js';
import { handlePaymentRefunded } from './consumers/payment-refunded.js';
import { connectDatabase, type PrismaClient } from './db.js';
import { emailRoutes } from './http/routes.js';

/** Builds and starts the notifications service: the composition root, shared by main.ts and tests. */
export async function startNotifications(
  config: NotificationsConfig,
  { faults = faultsFromEnv(), now = () => new Date() }: { faults?: Faults; now?: () => Date } = {},
): Promise<RunningService & { db: PrismaClient }> {
  const log = createLogger('notifications', config.LOG_LEVEL);
  const db = connectDatabase(config.DATABASE_URL, config.DATABASE_POOL_MAX);
  const running = await runService({
    catalogue: shop,
    name: 'notifications',
    config,
    log,
    db,
    faults,
    now,
    consumers: {
      'notifications.order-placed.v1': handleOrderPlaced({ now }),
      'notifications.payment-captured.v1': handlePaymentCaptured({ now }),
      'notifications.payment-refunded.v1': handlePaymentRefunded({ now }),
    },
    parts: [
      worker('email dispatcher', () =>
        createDispatcher({
          db,
          smtpUrl: config.SMTP_URL,
          ...(config.SMTP_LOOKUP_URL ? { lookupUrl: config.SMTP_LOOKUP_URL } : {}),
          from: config.EMAIL_FROM,
          log,
          now,
          faults,
          databaseUrl: config.DATABASE_URL,
          maxAttempts: config.EMAIL_MAX_ATTEMPTS,
          leaseMs: config.DISPATCHER_LEASE_MS,
          pollIntervalMs: config.DISPATCHER_POLL_MS,
          retryDelayMs: config.EMAIL_RETRY_DELAY_MS,
          smtpTimeoutMs: config.SMTP_TIMEOUT_MS,
          smtpConnections: config.SMTP_CONNECTIONS,
        }),
      ),
      gauges(({ metrics }) =>
        metrics.gauge(
          'idem_email_work_items',
          'Email work items by status (pending, sent, dead).',
          ['status'],
          async () =>
            (await db.emailWorkItem.groupBy({ by: ['status'], _count: true })).map((g) => ({
              labels: { status: g.status },
              value: g._count,
            })),
        ),
      ),
      api('email API', (app, { operators }) => emailRoutes(app, { db, operators })),
      faultSwitches(),
    ],
  });
  return { ...running, db };
}
