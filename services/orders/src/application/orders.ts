import { randomUUID } from 'node:crypto';
import { execute, query, sql, type Sql } from '@idem/database';
import type { Tx, PrismaClient } from '../db.js';
import { moveOf, nextStatus, type OrderStatus, type OrderTrigger } from '../domain/order-status.js';
import type { PricedLine, RequestedLine } from '../domain/pricing.js';

/** An order as a customer asks for it: what the request says, and who the token says they are. */
export interface NewOrder {
  /** The customer placing it (their token's `sub`): the only caller besides the operator who sees it. */
  readonly customerId: string;
  /** Where its mail goes: their token's `email` claim, never an address the request names. */
  readonly customerEmail: string;
  readonly paymentMethod: string;
  readonly lines: readonly RequestedLine[];
}

/** A new order priced from the catalog: the prices it is placed, charged and refunded at. */
export interface PricedOrder extends Omit<NewOrder, 'lines'> {
  readonly currency: string;
  readonly lines: readonly PricedLine[];
  readonly totalCents: number;
}

export interface OrderView {
  readonly orderId: string;
  readonly status: OrderStatus;
  readonly version: number;
  readonly customerId: string;
  readonly customerEmail: string;
  readonly currency: string;
  readonly paymentMethod: string;
  readonly totalCents: number;
  readonly lines: { sku: string; quantity: number; unitPriceCents: number }[];
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly history?: {
    version: number;
    status: string;
    causationId: string | null;
    /** Why, in words the customer can read; absent where the status says it all. */
    reason?: string;
    occurredAt: string;
  }[];
}

const withLines = { lines: { orderBy: { lineNo: 'asc' } } } as const;
const withHistory = { ...withLines, history: { orderBy: { version: 'asc' } } } as const;

/** A new order as it is written: PENDING, version 1, with an id of its own. */
export function newOrder(order: PricedOrder, now: Date): OrderView {
  const { customerId, customerEmail, currency, paymentMethod, totalCents, lines } = order;
  return toView({
    id: randomUUID(),
    customerId,
    customerEmail,
    currency,
    paymentMethod,
    totalCents,
    status: 'PENDING',
    version: 1,
    createdAt: now,
    updatedAt: now,
    lines: [...lines],
  });
}

/**
 * The WITH list that writes `order` (from {@link newOrder}), its lines and its first history
 * entry when `onlyIf` holds: pieces of one statement (the lines' and history's foreign keys are
 * checked at its end, when the order is there).
 */
export function orderWrite(order: OrderView, onlyIf: Sql): Sql {
  const { orderId, customerId, customerEmail, currency, paymentMethod, totalCents, lines, createdAt } = order;
  return sql`
    created AS (
      INSERT INTO orders (id, customer_id, customer_email, currency, payment_method, status, version, total_cents, created_at, updated_at)
      SELECT ${orderId}::uuid, ${customerId}, ${customerEmail}, ${currency}, ${paymentMethod}, 'PENDING', 1, ${totalCents}::int,
             ${createdAt}::timestamptz, ${createdAt}::timestamptz
       WHERE ${onlyIf}
    ), lined AS (
      INSERT INTO order_lines (order_id, line_no, sku, quantity, unit_price_cents)
      SELECT ${orderId}::uuid, line.no, line.sku, line.quantity, line.unit_price_cents
      FROM unnest(${lines.map((l) => l.sku)}::text[], ${lines.map((l) => l.quantity)}::int[],
                  ${lines.map((l) => l.unitPriceCents)}::int[]) WITH ORDINALITY AS line(sku, quantity, unit_price_cents, no)
       WHERE ${onlyIf}
    ), first_status AS (
      INSERT INTO order_status_changes (order_id, version, status, occurred_at)
      SELECT ${orderId}::uuid, 1, 'PENDING', ${createdAt}::timestamptz WHERE ${onlyIf}
    )`;
}

/** Writes a PENDING order (version 1), its lines and its first history entry, in one statement. */
export async function createOrder(tx: Tx, order: PricedOrder, now: Date): Promise<OrderView> {
  const created = newOrder(order, now);
  await execute(tx, sql`WITH ${orderWrite(created, sql`TRUE`)} SELECT 1`);
  return created;
}

export type TransitionResult =
  | { readonly kind: 'changed'; readonly order: OrderView }
  | { readonly kind: 'not_applicable'; readonly status: OrderStatus }
  | { readonly kind: 'unknown_order' };

/** Whose orders a read or a change may touch: one customer's, or (undefined) every order. */
export type Owner = string | undefined;

/**
 * Moves an order on `trigger` if the state machine allows it from its current status, bumping
 * its version and recording which message (if any) caused the change and why. Concurrent events
 * for one order apply one after the other, on the order's row. Another owner's order is
 * `unknown_order`, as if it did not exist. The common case is one statement (`moveIfAllowed`);
 * when that moves nothing, the plain way decides (`decideAndMove`): the same outcome and rows
 * either way (orders.int.spec.ts, "gives the outcomes and rows of the plain way").
 */
export async function applyTransition(
  tx: Tx,
  orderId: string,
  trigger: OrderTrigger,
  change: StatusChange & { owner?: Owner },
): Promise<TransitionResult> {
  const moved = await moveIfAllowed(tx, orderId, trigger, change);
  return moved ? { kind: 'changed', order: moved } : decideAndMove(tx, orderId, trigger, change);
}

/** The plain way of {@link applyTransition}: lock the order and read it, let the state machine decide, then write. */
export async function decideAndMove(
  tx: Tx,
  orderId: string,
  trigger: OrderTrigger,
  change: StatusChange & { owner?: Owner },
): Promise<TransitionResult> {
  const current = await lockOrder(tx, orderId);
  if (!current || (change.owner !== undefined && current.customerId !== change.owner)) return { kind: 'unknown_order' };
  const status = nextStatus(current.status, trigger);
  if (!status) return { kind: 'not_applicable', status: current.status };
  return { kind: 'changed', order: await changeStatus(tx, current, status, change) };
}

/** Who changed an order's status, when, and why (in words its customer can read). */
export interface StatusChange {
  readonly now: Date;
  /** The message that caused it; null for a request. */
  readonly causationId: string | null;
  readonly reason?: string;
}

/**
 * The order with its lines, locked until the transaction ends (every change of an order takes
 * this lock first, so two messages about one order apply one after the other); undefined when
 * there is no such order.
 */
export async function lockOrder(tx: Tx, orderId: string): Promise<OrderView | undefined> {
  const [row] = await tx.$queryRaw<LockedOrder[]>`
    SELECT id, customer_id, customer_email, currency, payment_method, status, version, total_cents, created_at, updated_at,
           (SELECT json_agg(json_build_object('sku', sku, 'quantity', quantity, 'unitPriceCents', unit_price_cents)
                            ORDER BY line_no) FROM order_lines WHERE order_id = orders.id) AS lines
    FROM orders WHERE id = ${orderId}::uuid FOR UPDATE`;
  return row && viewOf(row);
}

const viewOf = (row: LockedOrder): OrderView =>
  toView({
    id: row.id,
    customerId: row.customer_id,
    customerEmail: row.customer_email,
    currency: row.currency,
    paymentMethod: row.payment_method,
    totalCents: row.total_cents,
    status: row.status,
    version: row.version,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    lines: row.lines ?? [],
  });

/** Moves a locked order to `status`: its next version and that version's history entry, in one statement. */
export async function changeStatus(
  tx: Tx,
  order: OrderView,
  status: OrderStatus,
  { now, causationId, reason }: StatusChange,
): Promise<OrderView> {
  const version = order.version + 1;
  await tx.$executeRaw`
    WITH changed AS (
      UPDATE orders SET status = ${status}, version = ${version}, updated_at = ${now} WHERE id = ${order.orderId}::uuid
    )
    INSERT INTO order_status_changes (order_id, version, status, causation_id, reason, occurred_at)
    VALUES (${order.orderId}::uuid, ${version}, ${status}, ${causationId}::uuid, ${reason ?? null}, ${now})`;
  return { ...order, status, version, updatedAt: now.toISOString() };
}

/** What {@link moveIfAllowed} needs to know of a move besides the order and its trigger. */
export type MoveCondition = StatusChange & { owner?: Owner; paying?: { amountCents: number; currency: string } };

/**
 * The order moved on `trigger` in one statement — when its status allows it, it is the owner's
 * and, for a capture (`paying`), the capture is its total in its currency — with its next version
 * and that version's history entry; undefined when nothing moved, and then nothing was written.
 * The row is locked by the write, so a concurrent change waits for this transaction, and this
 * write, if it waited for one, judges the status that change left.
 */
export async function moveIfAllowed(
  tx: Tx,
  orderId: string,
  trigger: OrderTrigger,
  change: MoveCondition,
): Promise<OrderView | undefined> {
  const [row] = await query<LockedOrder>(
    tx,
    sql`
      WITH ${moveWrite(orderId, trigger, change)}
      SELECT id, customer_id, customer_email, currency, payment_method, status, version, total_cents, created_at, updated_at,
             (SELECT json_agg(json_build_object('sku', sku, 'quantity', quantity, 'unitPriceCents', unit_price_cents)
                              ORDER BY line_no) FROM order_lines WHERE order_id = moved.id) AS lines
      FROM moved`,
  );
  return row && viewOf(row);
}

/**
 * {@link moveIfAllowed}'s write as the WITH list of a statement: `moved` has the order's row when
 * it moved, `recorded` writes the history entry. A consumer whose common case is this move gives
 * it to the inbox to run with its record as one statement (@idem/inbox one-statement.ts).
 */
export function moveWrite(
  orderId: string,
  trigger: OrderTrigger,
  { now, causationId, reason, owner, paying }: MoveCondition,
): Sql {
  const { from, to } = moveOf(trigger);
  return sql`
    moved AS (
      UPDATE orders SET status = ${to}, version = version + 1, updated_at = ${now}
       WHERE id = ${orderId}::uuid AND status = ANY(${from}::text[])
         AND (${owner ?? null}::text IS NULL OR customer_id = ${owner ?? null})
         AND (${paying?.amountCents ?? null}::int IS NULL OR (total_cents = ${paying?.amountCents ?? null} AND currency = ${paying?.currency ?? null}))
      RETURNING *
    ), recorded AS (
      INSERT INTO order_status_changes (order_id, version, status, causation_id, reason, occurred_at)
      SELECT id, version, status, ${causationId}::uuid, ${reason ?? null}, ${now} FROM moved
    )`;
}

/** An order row as `lockOrder` reads it, with its lines. */
interface LockedOrder {
  id: string;
  customer_id: string;
  customer_email: string;
  currency: string;
  payment_method: string;
  status: OrderStatus;
  version: number;
  total_cents: number;
  created_at: Date;
  updated_at: Date;
  lines: { sku: string; quantity: number; unitPriceCents: number }[] | null;
}

export async function findOrder(db: PrismaClient, orderId: string, owner?: Owner): Promise<OrderView | undefined> {
  const order = await db.order.findUnique({ where: { id: orderId, customerId: owner }, include: withHistory });
  return order ? toView(order) : undefined;
}

/** The owner's orders (every order for undefined), newest first, a page before `before`. */
export async function listOrders(
  db: PrismaClient,
  { owner, limit, before }: { owner: Owner; limit: number; before?: { createdAt: Date; id: string } },
): Promise<OrderView[]> {
  const orders = await db.order.findMany({
    where: {
      customerId: owner,
      ...(before
        ? { OR: [{ createdAt: { lt: before.createdAt } }, { createdAt: before.createdAt, id: { lt: before.id } }] }
        : {}),
    },
    orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
    take: limit,
    include: withLines,
  });
  return orders.map(toView);
}

type OrderRow = Awaited<ReturnType<Tx['order']['findUniqueOrThrow']>> & {
  lines: { sku: string; quantity: number; unitPriceCents: number }[];
  history?: { version: number; status: string; causationId: string | null; reason: string | null; occurredAt: Date }[];
};

function toView(order: OrderRow): OrderView {
  return {
    orderId: order.id,
    status: order.status as OrderStatus,
    version: order.version,
    customerId: order.customerId,
    customerEmail: order.customerEmail,
    currency: order.currency,
    paymentMethod: order.paymentMethod,
    totalCents: order.totalCents,
    lines: order.lines.map(({ sku, quantity, unitPriceCents }) => ({ sku, quantity, unitPriceCents })),
    createdAt: order.createdAt.toISOString(),
    updatedAt: order.updatedAt.toISOString(),
    ...(order.history
      ? {
          history: order.history.map((h) => ({
            version: h.version,
            status: h.status,
            causationId: h.causationId,
            ...(h.reason === null ? {} : { reason: h.reason }),
            occurredAt: h.occurredAt.toISOString(),
          })),
        }
      : {}),
  };
}
