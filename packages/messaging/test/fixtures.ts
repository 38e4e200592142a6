/**
 * Shared by the messaging tests and the child processes they SIGKILL: a business change
 * that is visibly wrong when applied twice.
 */
import { randomUUID } from 'node:crypto';
import { shop, type Envelope, type EventDraft } from '@idem/shop';
import { processed, stale, type MessageHandler } from '@idem/inbox';
import { enqueue } from '@idem/outbox';
import type { PrismaClient } from '@idem/testkit';
import { defaultDeliveryPolicy } from '@idem/transport';

export type Tx = Parameters<Parameters<PrismaClient['$transaction']>[0]>[0];

/**
 * An order for this SKU holds its inbox transaction for a moment and changes nothing (stale):
 * the deliveries that arrive meanwhile wait for that commit and then commit together, one batch.
 */
export const HOLDING_SKU = 'hold-the-line';

/**
 * A consumer's policy in these tests: fast retries, and completed jobs removed at once, so a second
 * publication of a message really reaches the consumer instead of being swallowed by BullMQ's
 * jobId dedupe — the inbox must suppress it. Every instance of a consumer uses the same.
 */
export const KEEP_NOTHING = { ...defaultDeliveryPolicy, attempts: 3, backoffDelayMs: 50, keepCompletedMs: 0 };

/** Takes one unit of stock for the consumer (its own stock row) and records the reservation. */
export const reserveOneUnit =
  (consumer: string): MessageHandler<Tx, Envelope<'orders.order-placed.v1'>> =>
  async (message, tx) => {
    if (message.body.lines[0]!.sku === HOLDING_SKU) {
      await new Promise((resolve) => setTimeout(resolve, 400));
      return stale('held the transaction so that the next deliveries form one batch');
    }
    await tx.stockItem.update({ where: { sku: consumer }, data: { available: { decrement: 1 } } });
    if (consumer === 'inventory.order-placed.v1') {
      await tx.reservation.create({ data: { orderId: message.body.orderId, sku: consumer, quantity: 1 } });
    }
    return processed;
  };

/** `count` orders placed in one transaction of `db`: their events, in the outbox. */
export async function writeOrders(db: PrismaClient, count: number): Promise<Envelope[]> {
  return db.$transaction(async (tx) => {
    const written: Envelope[] = [];
    for (let i = 0; i < count; i++) written.push(await enqueue(tx, shop, orderPlaced(), new Date()));
    return written;
  });
}

/** A new order-placed event of one unit, to enqueue. */
export function orderPlaced(): EventDraft<'orders.order-placed.v1'> {
  const orderId = randomUUID();
  return {
    type: 'orders.order-placed.v1',
    body: {
      orderId,
      customerEmail: 'ada@example.com',
      currency: 'eur',
      paymentMethod: 'pm_card_visa',
      lines: [{ sku: 'sku-1', quantity: 1, unitPriceCents: 100 }],
      totalCents: 100,
    },
    aggregateId: orderId,
    aggregateVersion: 1,
    correlationId: randomUUID(),
    causationId: null,
  };
}
