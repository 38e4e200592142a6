import { randomUUID } from 'node:crypto';
import { traceparentOf } from '@idem/contracts';
import { processed, transientFailure, type HandlerResult } from '@idem/inbox';
import type { PrismaClient, Tx } from '../db.js';
import type { Email, OrderSummary } from '../domain/emails.js';

/**
 * Records an email to send, in the caller's (inbox) transaction, unless one with the same
 * business dedupe key exists. Nothing is sent here: SMTP is not transactional, so the
 * dispatcher sends after the commit. The Message-ID is fixed now, so every send of this item
 * carries the same one. The delivery's trace context goes with it: the dispatcher continues it.
 */
export async function addEmailWorkItem(
  tx: Tx,
  item: { dedupeKey: string; kind: string; orderId: string; to: string; email: Email },
  now: Date,
): Promise<boolean> {
  const id = randomUUID();
  const { count } = await tx.emailWorkItem.createMany({
    data: {
      id,
      dedupeKey: item.dedupeKey,
      kind: item.kind,
      orderId: item.orderId,
      toAddress: item.to,
      subject: item.email.subject,
      textBody: item.email.text,
      htmlBody: item.email.html,
      messageId: `<email-${id}@idem.local>`,
      status: 'pending',
      nextAttemptAt: now,
      traceparent: traceparentOf(),
      createdAt: now,
      updatedAt: now,
    },
    skipDuplicates: true,
  });
  return count === 1;
}

/**
 * Emails about a payment need the order's lines, which arrive with orders.order-placed.v1 on
 * another queue. If that has not been processed yet, the delivery is retried later.
 */
export async function emailAboutOrder(
  tx: Tx,
  orderId: string,
  kind: string,
  write: (order: OrderSummary) => Email,
  now: Date,
): Promise<HandlerResult> {
  const summary = await tx.orderSummary.findUnique({ where: { orderId } });
  if (!summary) return transientFailure('order_not_known_yet', `order ${orderId} has not been seen here yet`);
  const order = { ...summary, lines: summary.lines as unknown as OrderSummary['lines'] };
  await addEmailWorkItem(
    tx,
    { dedupeKey: `${kind}:${orderId}`, kind, orderId, to: summary.customerEmail, email: write(order) },
    now,
  );
  return processed;
}

/** An order's email work items, oldest first. */
export const emailWorkItemsOf = (db: PrismaClient, orderId: string) =>
  db.emailWorkItem.findMany({ where: { orderId }, orderBy: { createdAt: 'asc' } });
