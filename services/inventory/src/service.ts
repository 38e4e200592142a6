import { faultsFromEnv, type Faults } from '@idem/faults';
import { shop } from '@idem/shop';
import { api, createLogger, faultSwitches, runService, worker, type RunningService } from '@idem/runtime';
import type { InventoryConfig } from './config.js';
import { handleOrderCancelled } from './consumers/order-cancelled.js';
import { handleOrderPlaced } from './consumers/order-placed.js';
import { handlePaymentCaptured } from './consumers/payment-captured.js';
import { handlePaymentFailed } from './consumers/payment-failed.js';
import { connectDatabase, type PrismaClient } from './db.js';
import { stockRoutes } from './http/routes.js';
import { createReservationExpiry } from './workers/reservation-expiry.js';

/** Builds and starts the inventory service: the composition root, shared by main.ts and tests. */
export async function startInventory(
  config: InventoryConfig,
  { faults = faultsFromEnv(), now = () => new Date() }: { faults?: Faults; now?: () => Date } = {},
): Promise<RunningService & { db: PrismaClient }> {
  const log = createLogger('inventory', config.LOG_LEVEL);
  const db = connectDatabase(config.DATABASE_URL, config.DATABASE_POOL_MAX);
  const running = await runService({
    catalogue: shop,
    name: 'inventory',
    config,
    log,
    db,
    faults,
    now,
    consumers: {
      'inventory.order-placed.v1': handleOrderPlaced({ now }),
      'inventory.order-cancelled.v1': handleOrderCancelled({ now }),
      'inventory.payment-failed.v1': handlePaymentFailed({ now }),
      'inventory.payment-captured.v1': handlePaymentCaptured({ now }),
    },
    outbox: true,
    parts: [
      worker('reservation expiry', () =>
        createReservationExpiry({
          db,
          now,
          ttlMs: config.RESERVATION_TTL_MS,
          intervalMs: config.RESERVATION_SWEEP_MS,
          log,
        }),
      ),
      api('stock API', (app, { operators }) => stockRoutes(app, { db, operators, now })),
      faultSwitches(),
    ],
  });
  return { ...running, db };
}
