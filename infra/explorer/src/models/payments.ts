import type { Server } from 'node:http';
import {
  connectDatabase,
  createPaymentWorker,
  createStripeClient,
  handleOrderCancelled,
  handleStockReserved,
  newChargeKey,
  PACKAGE_TABLES,
  type Tx,
  type PrismaClient,
} from '@idem/payments';
import { processed, stale, type MessageHandler } from '@idem/inbox';
import { createLogger } from '@idem/runtime';
import type { MessageOf } from '@idem/shop';
import { createStripeSimulator, SIMULATOR_API_KEY } from '@idem/stripe-sim';
import { testMessage } from '@idem/testkit';
import { cancellationsOf, deliver, type Model, type Service, type Story } from '../model.js';
import { worldOf } from './world.js';

const ORDER = '5a0c1d2e-0000-4000-8000-000000000001';
/** The worker has nothing to do for the order before its reservation. */
const causes = { worker: 'reserved' };
const AMOUNT = 4999;

/**
 * Payments, for one order: its stock reserved (the payment falls due), the order cancelled, and
 * the payment worker's turn (a charge or a refund at the Stripe simulator, through the real SDK).
 */
export const payments: Model = {
  name: 'payments',
  wrongWays: ['unlocked-order-row'],
  async open({ wrongWay }) {
    const world = await worldOf<Tx, PrismaClient>('payments', PACKAGE_TABLES, connectDatabase);
    const { db, explored, clock, switches, inbox } = world;
    const simulator = createStripeSimulator();
    const server = await new Promise<Server>((resolve) => {
      const listening = simulator.app.listen(0, '127.0.0.1', () => resolve(listening));
    });
    const worker = createPaymentWorker({
      db: explored,
      stripe: createStripeClient({
        apiKey: SIMULATOR_API_KEY,
        apiBase: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
        timeoutMs: 5_000,
      }),
      log: createLogger('payments', 'silent'),
      now: clock.now,
      faults: switches,
      leaseMs: 30_000,
      // One attempt a turn: a scheduled side is one flow of statements.
      batchSize: 1,
    });
    const reserved = testMessage('inventory.stock-reserved.v1', {
      aggregateId: ORDER,
      body: { orderId: ORDER, payment: { amountCents: AMOUNT, currency: 'eur', method: 'pm_card_visa' } },
    });
    const { cancelled, cancelledV2 } = cancellationsOf(ORDER);
    const reserving = wrongWay === 'unlocked-order-row' ? stockReservedUnlocked(clock.now) : handleStockReserved(clock);
    const steps: Record<string, () => Promise<unknown>> = {
      reserved: () => deliver(inbox, 'payments.stock-reserved.v1', reserved, reserving),
      cancelled: () => deliver(inbox, 'payments.order-cancelled.v1', cancelled, handleOrderCancelled(clock)),
      'cancelled v2': () => deliver(inbox, 'payments.order-cancelled.v1', cancelledV2, handleOrderCancelled(clock)),
      worker: () => worker.runOnce(),
    };
    const service: Service = {
      databaseUrl: world.databaseUrl,
      stories: [
        { name: 'reserved, then paid', steps: ['reserved', 'worker'], causes },
        { name: 'reserved, cancelled, paid or not', steps: ['reserved', 'cancelled', 'worker'], causes },
        {
          name: 'reserved, cancelled in v1 and again in v2, paid or not',
          steps: ['reserved', 'cancelled', 'cancelled v2', 'worker'],
          causes,
          copies: 1,
        },
      ],
      async reset() {
        await world.reset();
        simulator.reset();
      },
      step: (name, { crash = false } = {}) =>
        world.step(steps[name]!, crash ? ['rollback-after-handler', 'crash-after-provider-call'] : undefined),
      async settle() {
        // The worker's turns until nothing is due: a lookup waits out the provider's search lag.
        for (let turn = 0; turn < 10; turn++) {
          clock.advance(10 * 60_000);
          await worker.runOnce();
          const [open] = await db.$queryRaw<{ n: number }[]>`
            SELECT count(*)::int AS n FROM payment_attempts WHERE status IN ('pending', 'refund_pending')`;
          if (open!.n === 0) return;
        }
      },
      check: (story) => check(db, simulator, story),
      async state() {
        const [row] = await db.$queryRaw<
          { cancelled: boolean | null; attempt: string | null; events: string[] | null }[]
        >`
          SELECT (SELECT cancelled_at IS NOT NULL FROM payment_orders) AS cancelled,
                 (SELECT string_agg(status, ', ') FROM payment_attempts) AS attempt,
                 (SELECT array_agg(type ORDER BY type) FROM outbox_messages) AS events`;
        const charged = simulator.paymentIntents().filter((intent) => intent.status === 'succeeded').length;
        return [
          row!.cancelled ? 'order cancelled' : 'order not cancelled',
          `attempt ${row!.attempt ?? 'none'}`,
          `provider: ${charged} charged, ${simulator.refunds().length} refunded`,
          `events: ${(row!.events ?? []).map((type) => type.replace(/^payments\.|\.v1$/g, '')).join(', ') || 'none'}`,
        ].join(' · ');
      },
      async close() {
        await new Promise((resolve) => server.close(resolve));
        await world.close();
      },
    };
    return service;
  },
};

/** The invariants of one order's money, read from the service and the provider after it settled. */
async function check(
  db: ReturnType<typeof connectDatabase>,
  simulator: ReturnType<typeof createStripeSimulator>,
  story: Story,
): Promise<string[]> {
  const [row] = await db.$queryRaw<{ cancelled: boolean | null; attempts: number; open: number }[]>`
    SELECT (SELECT cancelled_at IS NOT NULL FROM payment_orders WHERE order_id = ${ORDER}::uuid) AS cancelled,
           (SELECT count(*)::int FROM payment_attempts WHERE order_id = ${ORDER}::uuid) AS attempts,
           (SELECT count(*)::int FROM payment_attempts
             WHERE order_id = ${ORDER}::uuid AND status NOT IN ('captured', 'cancelled', 'refunded', 'failed')) AS open`;
  const events = await db.$queryRaw<{ type: string; n: number }[]>`
    SELECT type, count(*)::int AS n FROM outbox_messages GROUP BY type`;
  const published = (type: string) => events.find((e) => e.type === type)?.n ?? 0;
  const charges = simulator
    .paymentIntents()
    .filter((intent) => intent.metadata.order_id === ORDER && intent.status === 'succeeded');
  const refunds = simulator.refunds().filter((refund) => charges.some((charge) => charge.id === refund.payment_intent));
  const kept = charges.reduce((sum, c) => sum + c.amount_received, 0) - refunds.reduce((sum, r) => sum + r.amount, 0);
  const cancelled = story.steps.some((step) => step.startsWith('cancelled'));
  const broken: string[] = [];
  if (row!.attempts > 1) broken.push(`the order has ${row!.attempts} payment attempts, not one`);
  if (row!.open > 0) broken.push('the payment never reached a final status');
  if (cancelled && kept !== 0) broken.push(`the cancelled order keeps ${kept} cents at the provider`);
  if (!cancelled && (charges.length !== 1 || kept !== AMOUNT))
    broken.push(`the paid order was charged ${charges.length} times, keeping ${kept} cents, not ${AMOUNT} once`);
  if (published('payments.payment-captured.v1') !== charges.length)
    broken.push(`${published('payments.payment-captured.v1')} payment-captured events for ${charges.length} charges`);
  if (published('payments.payment-refunded.v1') !== refunds.length)
    broken.push(`${published('payments.payment-refunded.v1')} payment-refunded events for ${refunds.length} refunds`);
  return broken;
}

type StockReserved = MessageOf<'payments.stock-reserved.v1'>;

/**
 * The mistake the cancel-versus-charge race was: the cancellation's tombstone read with a plain
 * read, and the attempt opened without writing (so without locking) the order's row. In either
 * order alone it is right; a cancellation committed between this read and this commit is missed.
 */
function stockReservedUnlocked(now: () => Date): MessageHandler<Tx, StockReserved> {
  return async ({ body: { orderId, payment }, correlationId, messageId }, tx) => {
    const [order] = await tx.$queryRaw<{ cancelled: boolean }[]>`
      SELECT cancelled_at IS NOT NULL AS cancelled FROM payment_orders WHERE order_id = ${orderId}::uuid`;
    if (order?.cancelled) return stale(`order ${orderId} was cancelled`);
    await tx.paymentAttempt.create({
      data: {
        id: crypto.randomUUID(),
        orderId,
        amountCents: payment.amountCents,
        currency: payment.currency,
        paymentMethod: payment.method,
        status: 'pending',
        idempotencyKey: newChargeKey(),
        idempotencyKeyCreatedAt: now(),
        nextAttemptAt: now(),
        correlationId,
        causationId: messageId,
        createdAt: now(),
        updatedAt: now(),
      },
    });
    return processed;
  };
}
