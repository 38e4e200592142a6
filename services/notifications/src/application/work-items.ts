import { randomUUID } from 'node:crypto';
import { boundReason, traceparentOf, type AnyEnvelope } from '@idem/contracts';
import {
  execute,
  localTakerIn,
  localTakerOf,
  query,
  sql,
  type LocalTaker,
  type Sql,
  type SqlClient,
} from '@idem/database';
import { processed, transientFailure, type OneStatementEffect, type OneStatementHandler } from '@idem/inbox';
import type { PrismaClient, Tx } from '../db.js';
import { afterFailedSend } from '../domain/email-work-item.js';
import { orderReceivedEmail, type Email, type OrderSummary } from '../domain/emails.js';
import type { EmailWorkItem } from '../generated/prisma/client.js';

/** The channel the dispatcher LISTENs on: an email work item was written. */
export const WORK_ITEMS_CHANNEL = 'idem_email_work_items';

/** The table a local dispatcher takes its items from (`takeHere`). */
export const WORK_ITEMS_TABLE = 'email_work_items';

/** An email to record: its business key (one email per key), whose, to whom, what. */
interface NewEmail {
  readonly businessKey: string;
  readonly kind: string;
  readonly orderId: string;
  readonly to: string;
  readonly email: Email;
}

/**
 * Records an email to send, in the caller's (inbox) transaction, unless one with the same
 * business key exists. Nothing is sent here: SMTP is not transactional, so the
 * dispatcher sends after the commit. The Message-ID is fixed now, so every send of this item
 * carries the same one. The delivery's trace context goes with it: the dispatcher continues it.
 * When this process runs a dispatcher, the item is written leased to it and handed to it once the
 * transaction commits (no claim, no notification); otherwise a listening dispatcher is woken.
 */
async function addEmailWorkItem(tx: Tx, email: NewEmail, now: Date): Promise<void> {
  const taker = localTakerIn<EmailWorkItem>(tx, WORK_ITEMS_TABLE);
  const row = emailWorkItem(email, now, taker);
  if ((await execute(tx, emailWorkItemInsert(row, { wake: !taker }))) > 0) taker?.handOver(row);
}

/** {@link addEmailWorkItem} as a piece of a statement that runs alone; see {@link acceptOrderWrite}. */
function emailWorkItemAlone(db: SqlClient, email: NewEmail, now: Date) {
  const taker = localTakerOf<EmailWorkItem>(db, WORK_ITEMS_TABLE);
  const row = emailWorkItem(email, now, taker);
  return { insert: emailWorkItemInsert(row, { wake: !taker }), afterCommit: () => taker?.take(row) };
}

/** The item of `email`, leased to `taker` as a claim leases it (one attempt counted) when there is one. */
function emailWorkItem(email: NewEmail, now: Date, taker: LocalTaker<EmailWorkItem> | undefined): EmailWorkItem {
  const id = randomUUID();
  return {
    id,
    businessKey: email.businessKey,
    kind: email.kind,
    orderId: email.orderId,
    toAddress: email.to,
    subject: email.email.subject,
    textBody: email.email.text,
    htmlBody: email.email.html,
    messageId: `<email-${id}@idem.local>`,
    status: 'pending',
    attempts: taker ? 1 : 0,
    nextAttemptAt: now,
    leaseOwner: taker?.owner ?? null,
    leaseExpiresAt: taker ? new Date(now.getTime() + taker.leaseMs) : null,
    lastError: null,
    sentAt: null,
    traceparent: traceparentOf() ?? null,
    createdAt: now,
    updatedAt: now,
  };
}

/**
 * The item's insert, unless one with its business key exists; when it is written and `wake`, the
 * wake-up for a listening dispatcher, delivered at the commit.
 */
function emailWorkItemInsert(row: EmailWorkItem, { wake }: { wake: boolean }): Sql {
  return sql`
    INSERT INTO email_work_items (id, business_key, kind, order_id, to_address, subject, text_body, html_body,
                                  message_id, status, attempts, next_attempt_at, lease_owner, lease_expires_at,
                                  traceparent, created_at, updated_at)
    VALUES (${row.id}::uuid, ${row.businessKey}, ${row.kind}, ${row.orderId}::uuid, ${row.toAddress}, ${row.subject},
            ${row.textBody}, ${row.htmlBody}, ${row.messageId}, 'pending', ${row.attempts}::int,
            ${row.nextAttemptAt}::timestamptz, ${row.leaseOwner}::text, ${row.leaseExpiresAt}::timestamptz,
            ${row.traceparent}::text, ${row.createdAt}::timestamptz, ${row.updatedAt}::timestamptz)
    ON CONFLICT DO NOTHING
    RETURNING CASE WHEN ${wake}::boolean THEN pg_notify(${WORK_ITEMS_CHANNEL}, '') END`;
}

/** A placed order as notifications keeps it. */
type PlacedOrder = OrderSummary & { customerEmail: string; placedAt: Date };

const orderReceived = (order: PlacedOrder): NewEmail => ({
  businessKey: `order-received:${order.orderId}`,
  kind: 'order-received',
  orderId: order.orderId,
  to: order.customerEmail,
  email: orderReceivedEmail(order),
});

/**
 * A placed order: its summary is kept (the later emails about it need its lines and address) and
 * its "order received" email is queued. Both are keyed by the order, so repeating it adds nothing.
 */
export async function acceptOrder(tx: Tx, order: PlacedOrder, now: Date): Promise<void> {
  const { orderId, customerEmail, currency, lines, totalCents, placedAt } = order;
  await tx.orderSummary.createMany({
    data: { orderId, customerEmail, currency, lines, totalCents, placedAt },
    skipDuplicates: true,
  });
  await addEmailWorkItem(tx, orderReceived(order), now);
}

/**
 * {@link acceptOrder} as the WITH list of one statement (`email` has a row when the email was
 * queued): the summary and the email, each unless it exists; when the email exists already,
 * nothing is recorded here and the plain way decides the delivery.
 */
export function acceptOrderWrite(db: SqlClient, order: PlacedOrder, now: Date): OneStatementEffect {
  const { orderId, customerEmail, currency, lines, totalCents, placedAt } = order;
  const email = emailWorkItemAlone(db, orderReceived(order), now);
  return {
    with: sql`
      summary AS (
        INSERT INTO order_summaries (order_id, customer_email, currency, lines, total_cents, placed_at)
        VALUES (${orderId}::uuid, ${customerEmail}, ${currency}, ${JSON.stringify(lines)}::jsonb, ${totalCents}::int,
                ${placedAt}::timestamptz)
        ON CONFLICT DO NOTHING
      ), email AS (${email.insert})`,
    wrote: 'email',
    afterCommit: email.afterCommit,
  };
}

/**
 * Emails about a payment need the order's lines, which arrive with orders.order-placed.v1 on
 * another queue: `order_not_known_yet` until that has been processed (the delivery is retried).
 */
export async function emailAboutOrder(
  tx: Tx,
  orderId: string,
  kind: string,
  write: (order: OrderSummary) => Email,
  now: Date,
): Promise<'queued' | 'order_not_known_yet'> {
  const summary = await summaryOf(tx, orderId);
  if (!summary) return 'order_not_known_yet';
  await addEmailWorkItem(tx, aboutOrder(summary, kind, write), now);
  return 'queued';
}

/**
 * {@link emailAboutOrder} as one statement once the order's summary is read (a summary is written
 * once and never changes, so it is read before the statement): `email` has a row when the email
 * was queued. Undefined when the order is not known yet, which the plain way decides.
 */
async function emailAboutOrderWrite(
  db: SqlClient,
  orderId: string,
  kind: string,
  write: (order: OrderSummary) => Email,
  now: Date,
): Promise<OneStatementEffect | undefined> {
  const summary = await summaryOf(db, orderId);
  if (!summary) return undefined;
  const email = emailWorkItemAlone(db, aboutOrder(summary, kind, write), now);
  return { with: sql`email AS (${email.insert})`, wrote: 'email', afterCommit: email.afterCommit };
}

const aboutOrder = (summary: KeptOrder, kind: string, write: (order: OrderSummary) => Email): NewEmail => ({
  businessKey: `${kind}:${summary.orderId}`,
  kind,
  orderId: summary.orderId,
  to: summary.customerEmail,
  email: write(summary),
});

/** An order's summary as kept here, with its customer's address. */
type KeptOrder = OrderSummary & { readonly customerEmail: string };

async function summaryOf(db: SqlClient, orderId: string): Promise<KeptOrder | undefined> {
  const [summary] = await query<KeptOrder>(
    db,
    sql`
      SELECT order_id::text AS "orderId", customer_email AS "customerEmail", currency, lines, total_cents AS "totalCents"
        FROM order_summaries WHERE order_id = ${orderId}::uuid`,
  );
  return summary;
}

/**
 * A message about an order's payment: queue its email (`kind`), once per order; when the order is
 * known, the email and the inbox's record are one statement. Until the order's summary has
 * arrived (orders.order-placed.v1, on another queue) the delivery is retried.
 */
export function emailAboutOrderHandler<M extends AnyEnvelope & { body: { orderId: string } }>(
  kind: string,
  write: (order: OrderSummary, message: M) => Email,
  { now }: { now: () => Date },
): OneStatementHandler<Tx, M> {
  return Object.assign(
    async (message: M, tx: Tx) => {
      const { orderId } = message.body;
      const queued = await emailAboutOrder(tx, orderId, kind, (order) => write(order, message), now());
      if (queued === 'order_not_known_yet')
        return transientFailure(queued, `order ${orderId} has not been seen here yet`);
      return processed;
    },
    {
      inOneStatement: (message: M, db: SqlClient) =>
        emailAboutOrderWrite(db, message.body.orderId, kind, (order) => write(order, message), now()),
    },
  );
}

const released = { leaseOwner: null, leaseExpiresAt: null } as const;

/** The SMTP server accepted the item's email: it is sent, and never sent again by a dispatcher that holds its lease. */
export async function recordSent(db: PrismaClient, item: { id: string }, now: Date): Promise<void> {
  await db.emailWorkItem.updateMany({
    where: { id: item.id, status: 'pending' },
    data: { ...released, status: 'sent', sentAt: now, lastError: null, updatedAt: now },
  });
}

/** A send failed: the item is retried later, or parked (see afterFailedSend); returns which. */
export async function recordFailedSend(
  db: PrismaClient,
  item: { id: string; attempts: number },
  failure: { responseCode: number; reason: string; maxAttempts: number; retryDelayMs: number },
  now: Date,
): Promise<'pending' | 'parked'> {
  const { status, retryInMs } = afterFailedSend(item, failure);
  await db.emailWorkItem.updateMany({
    where: { id: item.id, status: 'pending' },
    data: {
      ...released,
      status,
      lastError: boundReason(failure.reason),
      nextAttemptAt: new Date(now.getTime() + retryInMs),
      updatedAt: now,
    },
  });
  return status;
}

/** An order's email work items, oldest first. */
export const emailWorkItemsOf = (db: PrismaClient, orderId: string) =>
  db.emailWorkItem.findMany({ where: { orderId }, orderBy: { createdAt: 'asc' } });
