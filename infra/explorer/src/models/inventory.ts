import { processed, type MessageHandler } from '@idem/inbox';
import {
  connectDatabase,
  handleOrderCancelled,
  handleOrderPlaced,
  handlePaymentCaptured,
  handlePaymentFailed,
  PACKAGE_TABLES,
  releaseReservation,
  type Tx,
  type PrismaClient,
} from '@idem/inventory';
import type { MessageOf } from '@idem/shop';
import { testMessage } from '@idem/testkit';
import { cancellationsOf, deliver, type Model, type Service, type Story } from '../model.js';
import { worldOf } from './world.js';

const ORDER = '5a0c1d2e-0000-4000-8000-000000000002';
const SKU = 'keyboard';
const STOCK = 5;
const QUANTITY = 2;
/** Payments answers the reservation that placing the order made: never before it. */
const causes = { captured: 'placed', failed: 'placed' };

/**
 * Inventory, for one order of two keyboards out of five: the order placed (its stock reserved),
 * cancelled, its payment captured (the stock sold) or failed (the stock back).
 */
export const inventory: Model = {
  name: 'inventory',
  wrongWays: ['no-tombstone'],
  async open({ wrongWay }) {
    const world = await worldOf<Tx, PrismaClient>('inventory', PACKAGE_TABLES, connectDatabase);
    const { db, clock, inbox } = world;
    const order = { aggregateId: ORDER, correlationId: ORDER };
    const placed = testMessage('orders.order-placed.v1', {
      ...order,
      body: { orderId: ORDER, lines: [{ sku: SKU, quantity: QUANTITY, unitPriceCents: 4999 }], totalCents: 9998 },
    });
    const { cancelled, cancelledV2 } = cancellationsOf(ORDER);
    const captured = testMessage('payments.payment-captured.v1', {
      ...order,
      aggregateVersion: 2,
      body: { orderId: ORDER },
    });
    const failed = testMessage('payments.payment-failed.v1', {
      ...order,
      aggregateVersion: 2,
      body: { orderId: ORDER },
    });
    const cancelling = wrongWay === 'no-tombstone' ? cancelWithoutTombstone(clock.now) : handleOrderCancelled(clock);
    const steps: Record<string, () => Promise<unknown>> = {
      placed: () => deliver(inbox, 'inventory.order-placed.v1', placed, handleOrderPlaced(clock)),
      cancelled: () => deliver(inbox, 'inventory.order-cancelled.v1', cancelled, cancelling),
      'cancelled v2': () => deliver(inbox, 'inventory.order-cancelled.v1', cancelledV2, cancelling),
      captured: () => deliver(inbox, 'inventory.payment-captured.v1', captured, handlePaymentCaptured(clock)),
      failed: () => deliver(inbox, 'inventory.payment-failed.v1', failed, handlePaymentFailed(clock)),
    };
    const service: Service = {
      databaseUrl: world.databaseUrl,
      stories: [
        { name: 'placed, then paid', steps: ['placed', 'captured'], causes },
        { name: 'placed, not paid', steps: ['placed', 'failed'], causes },
        { name: 'placed, paid, cancelled', steps: ['placed', 'captured', 'cancelled'], causes },
        { name: 'placed, not paid, cancelled', steps: ['placed', 'failed', 'cancelled'], causes },
        {
          name: 'placed, paid, cancelled in v1 and again in v2',
          steps: ['placed', 'captured', 'cancelled', 'cancelled v2'],
          causes,
          copies: 1,
        },
      ],
      async reset() {
        await world.reset();
        await db.$executeRaw`INSERT INTO stock_items (sku, available, reserved, updated_at)
                             VALUES (${SKU}, ${STOCK}, 0, ${clock.now()})`;
      },
      step: (name, { crash = false } = {}) => world.step(steps[name]!, crash ? ['rollback-after-handler'] : undefined),
      settle: async () => undefined,
      check: (story) => check(db, story),
      async state() {
        const rows = await db.$queryRaw<unknown[]>`
          SELECT (SELECT json_agg(json_build_object('available', available, 'reserved', reserved)) FROM stock_items) AS stock,
                 (SELECT array_agg(status) FROM reservations) AS reservations,
                 (SELECT array_agg(type ORDER BY type) FROM outbox_messages) AS events`;
        return JSON.stringify(rows);
      },
      close: () => world.close(),
    };
    return service;
  },
};

/** The invariants of one order's stock, after its story. */
async function check(db: ReturnType<typeof connectDatabase>, story: Story): Promise<string[]> {
  const [row] = await db.$queryRaw<
    { available: number; reserved: number; held: number; sold: number; status: string | null; announced: number }[]
  >`
    SELECT s.available, s.reserved,
           coalesce((SELECT sum((l->>'quantity')::int) FROM reservations r, jsonb_array_elements(r.lines) l
                      WHERE r.status = 'reserved'), 0)::int AS held,
           coalesce((SELECT sum((l->>'quantity')::int) FROM reservations r, jsonb_array_elements(r.lines) l
                      WHERE r.status = 'committed'), 0)::int AS sold,
           (SELECT status FROM reservations WHERE order_id = ${ORDER}::uuid) AS status,
           (SELECT count(*)::int FROM outbox_messages WHERE type = 'inventory.stock-reserved.v1') AS announced
      FROM stock_items s WHERE s.sku = ${SKU}`;
  const { available, reserved, held, sold, status, announced } = row!;
  const neverPaid = story.steps.some((step) => step.startsWith('cancelled') || step === 'failed');
  const broken: string[] = [];
  if (available + reserved + sold !== STOCK)
    broken.push(`stock not conserved: ${available} available + ${reserved} reserved + ${sold} sold ≠ ${STOCK}`);
  if (reserved !== held) broken.push(`${reserved} reserved in stock, but reservations hold ${held}`);
  if (available < 0 || reserved < 0) broken.push(`negative stock: ${available} available, ${reserved} reserved`);
  if (neverPaid && (held > 0 || sold > 0))
    broken.push(`an order that will never be paid holds ${held} and sold ${sold} (reservation ${status})`);
  if (!neverPaid && (status !== 'committed' || sold !== QUANTITY))
    broken.push(`the paid order's stock is ${status ?? 'not reserved'}, ${sold} sold, not ${QUANTITY}`);
  if (announced > 1) broken.push(`stock-reserved published ${announced} times`);
  return broken;
}

type OrderCancelled = MessageOf<'inventory.order-cancelled.v1'>;

/**
 * The mistake the tombstone prevents: a cancellation that gives back the stock of the
 * reservation it finds, and records nothing when there is none yet. After the order-placed it is
 * right; before it, the late order-placed reserves stock for a cancelled order.
 */
function cancelWithoutTombstone(now: () => Date): MessageHandler<Tx, OrderCancelled> {
  return async (message, tx) => {
    await releaseReservation(tx, message.body.orderId, now());
    return processed;
  };
}
