/**
 * Where an order's latency goes, hop by hop, from the timestamps the services already write: the
 * order's row, each outbox row (written, published), each inbox record (the delivery handled),
 * the PAID history entry and the receipt's sent_at. Every timestamp comes from a service's clock
 * on this machine, so the differences are comparable; a hop the request's own clock starts (the
 * POST) uses the load generator's send time.
 */
import { readOnly } from '@idem/database';
import type { RunningSystem } from '@idem/native-run';
import { percentile } from './stats.js';

/** The hops from POST to PAID and on to the receipt, in order. */
export const HOPS = [
  'POST → order written',
  'orders relay',
  '→ inventory (delivered)',
  'inventory relay',
  '→ payments (delivered)',
  'payment worker (Stripe call included)',
  'payments relay',
  '→ orders (PAID)',
  'payment captured → receipt sent',
] as const;
export type Hop = (typeof HOPS)[number];

/** p50 and p95 of each hop, in ms, over the orders that went through all of them. */
export type HopLatencies = Record<Hop, { p50: number; p95: number }>;

interface OutboxRow {
  order_id: string;
  message_id: string;
  created_at: Date;
  published_at: Date | null;
}

const outboxOf = (type: string) =>
  `SELECT envelope->>'aggregateId' AS order_id, message_id::text, created_at, published_at
     FROM outbox_messages WHERE type = '${type}' AND envelope->>'aggregateId' = ANY($1::text[])`;
const handledBy = (consumer: string) =>
  `SELECT message_id::text, processed_at AS at FROM processed_messages WHERE consumer = '${consumer}' AND message_id = ANY($1::uuid[])`;

export async function hopLatencies(system: RunningSystem, sentAt: ReadonlyMap<string, number>): Promise<HopLatencies> {
  const ids = [...sentAt.keys()];
  const { orders, inventory, payments, notifications } = system.databaseUrls;
  const byOrder = <R extends { order_id: string }>(rows: R[]) => new Map(rows.map((row) => [row.order_id, row]));
  const byMessage = (rows: { message_id: string; at: Date }[]) =>
    new Map(rows.map((r) => [r.message_id, r.at.getTime()]));

  const fromOrders = await readOnly(orders, async (query) => ({
    created: await query<{ order_id: string; at: Date }>(
      `SELECT id::text AS order_id, created_at AS at FROM orders WHERE id = ANY($1::uuid[])`,
      [ids],
    ),
    placed: await query<OutboxRow>(outboxOf('orders.order-placed.v1'), [ids]),
    paid: await query<{ order_id: string; at: Date }>(
      `SELECT order_id::text, occurred_at AS at FROM order_status_changes WHERE status = 'PAID' AND order_id = ANY($1::uuid[])`,
      [ids],
    ),
  }));
  const placed = byOrder(fromOrders.placed);
  const fromInventory = await readOnly(inventory, async (query) => ({
    handled: await query<{ message_id: string; at: Date }>(handledBy('inventory.order-placed.v1'), [
      fromOrders.placed.map((row) => row.message_id),
    ]),
    reserved: await query<OutboxRow>(outboxOf('inventory.stock-reserved.v1'), [ids]),
  }));
  const reserved = byOrder(fromInventory.reserved);
  const fromPayments = await readOnly(payments, async (query) => ({
    handled: await query<{ message_id: string; at: Date }>(handledBy('payments.stock-reserved.v1'), [
      fromInventory.reserved.map((row) => row.message_id),
    ]),
    captured: await query<OutboxRow>(outboxOf('payments.payment-captured.v1'), [ids]),
  }));
  const captured = byOrder(fromPayments.captured);
  const receipts = await readOnly(notifications, (query) =>
    query<{ order_id: string; at: Date }>(
      `SELECT order_id::text, sent_at AS at FROM email_work_items WHERE kind = 'receipt' AND status = 'sent' AND order_id = ANY($1::uuid[])`,
      [ids],
    ),
  );

  const created = new Map(fromOrders.created.map((row) => [row.order_id, row.at.getTime()]));
  const paid = new Map(fromOrders.paid.map((row) => [row.order_id, row.at.getTime()]));
  const sent = new Map(receipts.map((row) => [row.order_id, row.at.getTime()]));
  const inventoryHandled = byMessage(fromInventory.handled);
  const paymentsHandled = byMessage(fromPayments.handled);
  const samples = Object.fromEntries(HOPS.map((hop) => [hop, [] as number[]])) as Record<Hop, number[]>;
  for (const id of ids) {
    const [p, r, c] = [placed.get(id), reserved.get(id), captured.get(id)];
    if (!p?.published_at || !r?.published_at || !c?.published_at) continue;
    const times = [
      sentAt.get(id),
      created.get(id),
      p.published_at.getTime(),
      inventoryHandled.get(p.message_id),
      r.published_at.getTime(),
      paymentsHandled.get(r.message_id),
      c.created_at.getTime(),
      c.published_at.getTime(),
      paid.get(id),
    ];
    const receipt = sent.get(id);
    if (times.some((t) => t === undefined) || receipt === undefined) continue;
    // Each hop ends where the next begins; the receipt runs beside the last hop, from the capture's publication.
    for (const [i, hop] of HOPS.slice(0, -1).entries()) samples[hop].push(times[i + 1]! - times[i]!);
    samples['payment captured → receipt sent'].push(receipt - c.published_at.getTime());
  }
  return Object.fromEntries(
    HOPS.map((hop) => [hop, { p50: percentile(samples[hop], 50), p95: percentile(samples[hop], 95) }]),
  ) as HopLatencies;
}
