import { faultsFromEnv, type Faults } from '@idem/faults';
import { createInbox } from '@idem/inbox';
import { consumer, createLogger, runService, type RunningService } from '@idem/runtime';
import type { NotificationsConfig } from './config.js';
import { handleOrderPlaced } from './consumers/order-placed.js';
import { handlePaymentCaptured, handlePaymentRefunded } from './consumers/payment-emails.js';
import { connectDatabase, type PrismaClient } from './db.js';
import { createDispatcher } from './dispatcher.js';
import { emailRoutes } from './http/routes.js';

/** Builds and starts the notifications service: the composition root, shared by main.ts and tests. */
export async function startNotifications(
  config: NotificationsConfig,
  { faults = faultsFromEnv(), now = () => new Date() }: { faults?: Faults; now?: () => Date } = {},
): Promise<RunningService & { db: PrismaClient }> {
  const log = createLogger('notifications', config.LOG_LEVEL);
  const db = connectDatabase(config.DATABASE_URL, config.DATABASE_POOL_MAX);
  const running = await runService({
    name: 'notifications',
    config,
    log,
    db,
    faults,
    inbox: createInbox({ db, faults, now }),
    publishes: false,
    consumers: [
      consumer('notifications.order-placed.v1', handleOrderPlaced({ now })),
      consumer('notifications.payment-captured.v1', handlePaymentCaptured({ now })),
      consumer('notifications.payment-refunded.v1', handlePaymentRefunded({ now })),
    ],
    workers: [
      createDispatcher({
        db,
        smtpUrl: config.SMTP_URL,
        from: config.EMAIL_FROM,
        log,
        now,
        faults,
        maxAttempts: config.EMAIL_MAX_ATTEMPTS,
        leaseMs: config.DISPATCHER_LEASE_MS,
        pollIntervalMs: config.DISPATCHER_POLL_MS,
        retryDelayMs: config.EMAIL_RETRY_DELAY_MS,
        smtpTimeoutMs: config.SMTP_TIMEOUT_MS,
      }),
    ],
    routes: (app) => emailRoutes(app, { db, adminToken: config.ADMIN_TOKEN }),
    metrics: (metrics) =>
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
  });
  return { ...running, db };
}
