import {
  cancelOrder,
  connectDatabase,
  createOrder,
  handlePaymentCaptured,
  handlePaymentFailed,
  handlePaymentRefunded,
  handleReservationExpired,
  handleStockRejected,
  handleStockReserved,
  PACKAGE_TABLES,
  type Tx,
  type PrismaClient,
} from '@idem/orders';
import type { Envelope, EventType } from '@idem/shop';
import { testMessage } from '@idem/testkit';
import { deliver, type Model, type Service, type Story } from '../model.js';
import { worldOf } from './world.js';

const CUSTOMER = 'ada';
const TOTAL = 9998;

/** Each story's order, and the status it must end in whatever the order of its steps. */
const STORIES: readonly (Story & { readonly ends: string })[] = [
  { name: 'reserved, then paid', steps: ['reserved', 'captured'], ends: 'PAID' },
  { name: 'reserved, not paid', steps: ['reserved', 'failed'], ends: 'PAYMENT_FAILED' },
  { name: 'rejected', steps: ['rejected'], ends: 'REJECTED' },
  { name: 'cancelled by the customer before paying', steps: ['reserved', 'cancel'], ends: 'CANCELLED' },
  {
    name: 'cancelled by the customer, paid meanwhile',
    steps: ['reserved', 'captured', 'cancel', 'refunded'],
    // Payments refunds once it hears of the cancellation.
    causes: { refunded: 'cancel' },
    copies: 1,
    ends: 'REFUNDED',
  },
  {
    name: 'expired, paid meanwhile',
    steps: ['reserved', 'captured', 'expired', 'refunded'],
    causes: { refunded: 'expired' },
    copies: 1,
    ends: 'REFUNDED',
  },
];

/**
 * Orders, for one order placed by a customer: its stock reserved or rejected, its payment
 * captured, failed or refunded, its reservation expired, and the customer's cancel (the HTTP use
 * case, in its own transaction; its "crash" is an answer lost and the request made again).
 */
export const orders: Model = {
  name: 'orders',
  wrongWays: [],
  async open() {
    const world = await worldOf<Tx, PrismaClient>('orders', PACKAGE_TABLES, connectDatabase);
    const { db, explored, clock, inbox } = world;
    let orderId = '';
    let messages: Record<string, Envelope<EventType>> = {};
    const message = <T extends EventType>(type: T, body: Partial<Envelope<T>['body']> = {}) =>
      testMessage(type, { aggregateId: orderId, correlationId: orderId, body: { orderId, ...body } } as never);
    const consume =
      <T extends EventType>(consumer: string, step: string, handler: unknown) =>
      () =>
        deliver(inbox, consumer, messages[step] as Envelope<T>, handler as never);
    const steps: Record<string, () => Promise<unknown>> = {
      reserved: consume('orders.stock-reserved.v1', 'reserved', handleStockReserved(clock)),
      rejected: consume('orders.stock-rejected.v1', 'rejected', handleStockRejected(clock)),
      captured: consume('orders.payment-captured.v1', 'captured', handlePaymentCaptured(clock)),
      failed: consume('orders.payment-failed.v1', 'failed', handlePaymentFailed(clock)),
      refunded: consume('orders.payment-refunded.v1', 'refunded', handlePaymentRefunded(clock)),
      expired: consume('orders.reservation-expired.v1', 'expired', handleReservationExpired(clock)),
      cancel: () =>
        cancelOrder(explored, {
          orderId,
          reason: 'changed my mind',
          owner: CUSTOMER,
          correlationId: orderId,
          now: clock.now,
        }),
    };
    const service: Service = {
      databaseUrl: world.databaseUrl,
      stories: STORIES,
      async reset() {
        await world.reset();
        const placed = await createOrder(
          db as unknown as Tx,
          {
            customerId: CUSTOMER,
            customerEmail: 'ada@example.com',
            paymentMethod: 'pm_card_visa',
            currency: 'eur',
            lines: [{ sku: 'keyboard', quantity: 2, unitPriceCents: TOTAL / 2 }],
            totalCents: TOTAL,
          },
          clock.now(),
        );
        orderId = placed.orderId;
        messages = {
          reserved: message('inventory.stock-reserved.v1'),
          rejected: message('inventory.stock-rejected.v1'),
          captured: message('payments.payment-captured.v1', { amountCents: TOTAL, currency: 'eur' }),
          failed: message('payments.payment-failed.v1'),
          refunded: message('payments.payment-refunded.v1', { amountCents: TOTAL, currency: 'eur' }),
          expired: message('inventory.reservation-expired.v1'),
        };
      },
      step(name, { crash = false } = {}) {
        const run = steps[name]!;
        if (!crash) return world.step(run);
        if (name !== 'cancel') return world.step(run, ['rollback-after-handler']);
        // The cancel committed and its answer was lost: the customer asks again.
        return world.step(async () => (await run(), run()));
      },
      settle: async () => undefined,
      check: (story) => check(db, story, orderId),
      async state() {
        const rows = await db.$queryRaw<unknown[]>`
          SELECT o.status, o.version,
                 (SELECT array_agg(status ORDER BY version) FROM order_status_changes) AS history,
                 (SELECT array_agg(type ORDER BY type) FROM outbox_messages) AS events
            FROM orders o`;
        return JSON.stringify(rows);
      },
      close: () => world.close(),
    };
    return service;
  },
};

/** The invariants of one order's status and what it told the others, after its story. */
async function check(db: ReturnType<typeof connectDatabase>, story: Story, orderId: string): Promise<string[]> {
  const [order] = await db.$queryRaw<{ status: string; version: number }[]>`
    SELECT status, version FROM orders WHERE id = ${orderId}::uuid`;
  const history = await db.$queryRaw<{ version: number; status: string }[]>`
    SELECT version, status FROM order_status_changes WHERE order_id = ${orderId}::uuid ORDER BY version`;
  const [told] = await db.$queryRaw<{ cancellations: number; last: Date | null; captured: Date | null }[]>`
    SELECT (SELECT count(*)::int FROM outbox_messages WHERE type LIKE 'orders.order-cancelled.%') AS cancellations,
           (SELECT max(created_at) FROM outbox_messages WHERE type LIKE 'orders.order-cancelled.%') AS last,
           (SELECT min(processed_at) FROM processed_messages WHERE consumer = 'orders.payment-captured.v1') AS captured`;
  const ends = STORIES.find((s) => s.name === story.name)!.ends;
  const cancelled = ends === 'CANCELLED' || ends === 'REFUNDED';
  const broken: string[] = [];
  if (order!.status !== ends) broken.push(`the order ends ${order!.status}, not ${ends}`);
  if (history.some((change, i) => change.version !== i + 1) || order!.version !== history.length)
    broken.push(`its history is not one change per version: ${history.map((h) => h.status).join(' → ')}`);
  if (new Set(history.map((h) => h.status)).size !== history.length)
    broken.push(`a status was entered twice: ${history.map((h) => h.status).join(' → ')}`);
  if (cancelled && told!.cancellations === 0) broken.push('the order was cancelled and nobody was told');
  if (!cancelled && told!.cancellations > 0) broken.push(`an order ending ${ends} announced a cancellation`);
  // A cancelled order keeps no money: payments hears of the cancellation after the capture, so it refunds it.
  if (cancelled && told!.captured && (!told!.last || told!.last < told!.captured))
    broken.push(
      'a capture reached the cancelled order after its last cancellation was announced: nobody asks for the refund',
    );
  return broken;
}
