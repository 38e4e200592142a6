import { randomUUID } from 'node:crypto';
import { boundReason, traceparentOf } from '@idem/contracts';
import { localTakerIn } from '@idem/database';
import type { PrismaClient, Tx } from '../db.js';
import { afterFailedSend } from '../domain/email-work-item.js';
import { orderReceivedEmail, type Email, type OrderSummary } from '../domain/emails.js';
import type { EmailWorkItem } from '../generated/prisma/client.js';

/** The channel the dispatcher LISTENs on: an email work item was written. */
export const WORK_ITEMS_CHANNEL = 'idem_email_work_items';

/** The table a local dispatcher takes its items from (`takeHere`). */
export const WORK_ITEMS_TABLE = 'email_work_items';

/**
 * Records an email to send, in the caller's (inbox) transaction, unless one with the same
 * business key exists. Nothing is sent here: SMTP is not transactional, so the
 * dispatcher sends after the commit. The Message-ID is fixed now, so every send of this item
 * carries the same one. The delivery's trace context goes with it: the dispatcher continues it.
 * When this process runs a dispatcher, the item is written leased to it and handed to it once the
 * transaction commits (no claim, no notification); otherwise a listening dispatcher is woken.
 */
async function addEmailWorkItem(
  tx: Tx,
  item: { businessKey: string; kind: string; orderId: string; to: string; email: Email },
  now: Date,
): Promise<void> {
  const taker = localTakerIn<EmailWorkItem>(tx, WORK_ITEMS_TABLE);
  const id = randomUUID();
  const row: EmailWorkItem = {
    id,
    businessKey: item.businessKey,
    kind: item.kind,
    orderId: item.orderId,
    toAddress: item.to,
    subject: item.email.subject,
    textBody: item.email.text,
    htmlBody: item.email.html,
    messageId: `<email-${id}@idem.local>`,
    status: 'pending',
    // Leased as a claim leases it: one attempt counted, the lease the dispatcher's claims hold.
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
  // One statement: the item (unless one with its business key exists) and, if it was written
  // and no dispatcher here takes it, the wake-up for a listening one, delivered at the commit.
  const [{ added } = { added: 0 }] = await tx.$queryRaw<{ added: number }[]>`
    WITH added AS (
      INSERT INTO email_work_items (id, business_key, kind, order_id, to_address, subject, text_body, html_body,
                                    message_id, status, attempts, next_attempt_at, lease_owner, lease_expires_at,
                                    traceparent, created_at, updated_at)
      VALUES (${row.id}::uuid, ${row.businessKey}, ${row.kind}, ${row.orderId}::uuid, ${row.toAddress}, ${row.subject},
              ${row.textBody}, ${row.htmlBody}, ${row.messageId}, 'pending', ${row.attempts}, ${now}, ${row.leaseOwner},
              ${row.leaseExpiresAt}, ${row.traceparent}, ${now}, ${now})
      ON CONFLICT DO NOTHING
      RETURNING 1
    ), woken AS (
      SELECT pg_notify(${WORK_ITEMS_CHANNEL}, '') FROM added WHERE ${!taker}
    )
    SELECT (SELECT count(*)::int FROM added) AS added, (SELECT count(*) FROM woken) AS woken`;
  if (added > 0) taker?.handOver(row);
}

/**
 * A placed order: its summary is kept (the later emails about it need its lines and address) and
 * its "order received" email is queued. Both are keyed by the order, so repeating it adds nothing.
 */
export async function acceptOrder(
  tx: Tx,
  order: OrderSummary & { customerEmail: string; placedAt: Date },
  now: Date,
): Promise<void> {
  const { orderId, customerEmail, currency, lines, totalCents, placedAt } = order;
  await tx.orderSummary.createMany({
    data: { orderId, customerEmail, currency, lines, totalCents, placedAt },
    skipDuplicates: true,
  });
  await addEmailWorkItem(
    tx,
    {
      businessKey: `order-received:${orderId}`,
      kind: 'order-received',
      orderId,
      to: customerEmail,
      email: orderReceivedEmail(order),
    },
    now,
  );
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
  const summary = await tx.orderSummary.findUnique({ where: { orderId } });
  if (!summary) return 'order_not_known_yet';
  const order = { ...summary, lines: summary.lines as unknown as OrderSummary['lines'] };
  await addEmailWorkItem(
    tx,
    { businessKey: `${kind}:${orderId}`, kind, orderId, to: summary.customerEmail, email: write(order) },
    now,
  );
  return 'queued';
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
