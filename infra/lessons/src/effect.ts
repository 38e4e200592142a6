import type { Envelope } from '@idem/shop';
import { processed, type MessageHandler } from '@idem/inbox';
import { defaultDeliveryPolicy } from '@idem/messaging';
import type { PrismaClient } from '@idem/testkit';

type Tx = Parameters<Parameters<PrismaClient['$transaction']>[0]>[0];

/** The consumer every lesson runs: a subscriber of orders.order-placed.v1. */
export const LESSON_CONSUMER = 'notifications.order-placed.v1';
export const STOCK = 1_000;
/** The consumer's policy: completed jobs removed at once, so a copy under another job id (or the same one) is delivered. */
export const LESSON_POLICY = { ...defaultDeliveryPolicy, keepCompletedMs: 0 };

/** The business change: one unit of the lesson's stock row per message (not idempotent by itself). */
export const takeOneUnit: MessageHandler<Tx, Envelope<'orders.order-placed.v1'>> = async (_message, tx) => {
  await tx.$executeRaw`UPDATE stock_items SET available = available - 1 WHERE sku = ${LESSON_CONSUMER}`;
  return processed;
};
