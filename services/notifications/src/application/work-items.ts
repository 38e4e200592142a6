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
import { processed, type OneStatementEffect, type OneStatementHandler } from '@idem/inbox';
import type { PrismaClient, Tx } from '../db.js';
import { afterFailedSend } from '../domain/email-work-item.js';
import {
  orderReceivedEmail,
  writeEmailAboutOrder,
  type Email,
  type OrderSummary,
  type EmailAboutOrderKind,
} from '../domain/emails.js';
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
    facts: null,
    unconfirmedSends: 0,
    reconciledSends: 0,
    leaseOverruns: 0,
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
 * An email about its payment that came first and waits for it is made due.
 */
export async function acceptOrder(tx: Tx, order: PlacedOrder, now: Date): Promise<void> {
  const { orderId, customerEmail, currency, lines, totalCents, placedAt } = order;
  await tx.orderSummary.createMany({
    data: { orderId, customerEmail, currency, lines, totalCents, placedAt },
    skipDuplicates: true,
  });
  await addEmailWorkItem(tx, orderReceived(order), now);
  await execute(tx, wakeWaitingEmails(orderId, now));
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
      ), woken AS (${wakeWaitingEmails(orderId, now)}),
      email AS (${email.insert})`,
    wrote: 'email',
    afterCommit: email.afterCommit,
  };
}

/**
 * An email about an order's payment (`kind`, one of EMAILS_ABOUT_ORDERS), queued once per order. It
 * needs the order's lines and address, which arrive with orders.order-placed.v1 on another queue:
 * until that has been processed here the email waits as a work item without its text, keeping what
 * the payment's message said, and the dispatcher writes it once the summary is here (the summary
 * wakes it). The order in which the two messages arrive never decides whether it is sent.
 */
export async function emailAboutOrder(
  tx: Tx,
  orderId: string,
  kind: EmailAboutOrderKind,
  facts: object,
  now: Date,
): Promise<'queued' | 'waiting_for_order'> {
  const summary = await summaryOf(tx, orderId);
  if (summary) {
    await addEmailWorkItem(tx, aboutOrder(summary, kind, facts), now);
    return 'queued';
  }
  await execute(tx, waitingEmailInsert({ orderId, kind, facts }, now));
  return 'waiting_for_order';
}

/**
 * {@link emailAboutOrder} as one statement once the order's summary is read (a summary is written
 * once and never changes, so it is read before the statement): `email` has a row when the email
 * was queued. Undefined when the order is not known yet, which the plain way decides.
 */
async function emailAboutOrderWrite(
  db: SqlClient,
  orderId: string,
  kind: EmailAboutOrderKind,
  facts: object,
  now: Date,
): Promise<OneStatementEffect | undefined> {
  const summary = await summaryOf(db, orderId);
  if (!summary) return undefined;
  const email = emailWorkItemAlone(db, aboutOrder(summary, kind, facts), now);
  return { with: sql`email AS (${email.insert})`, wrote: 'email', afterCommit: email.afterCommit };
}

const aboutOrder = (summary: KeptOrder, kind: EmailAboutOrderKind, facts: object): NewEmail => ({
  businessKey: `${kind}:${summary.orderId}`,
  kind,
  orderId: summary.orderId,
  to: summary.customerEmail,
  email: writeEmailAboutOrder(kind, summary, facts),
});

/** How soon an email waiting for its order is first looked at again, if the order's summary does not wake it. */
const FIRST_LOOK_MS = 1_000;

/**
 * The email about a payment whose order is not known yet: its business key, its kind and what the
 * message said, no text; due in a moment, unleased (its text is written by whichever dispatcher
 * takes it once the summary is here).
 */
function waitingEmailInsert({ orderId, kind, facts }: { orderId: string; kind: string; facts: object }, now: Date) {
  const id = randomUUID();
  return sql`
    INSERT INTO email_work_items (id, business_key, kind, order_id, facts, message_id, status, attempts, next_attempt_at,
                                  traceparent, created_at, updated_at)
    VALUES (${id}::uuid, ${`${kind}:${orderId}`}, ${kind}, ${orderId}::uuid, ${JSON.stringify(facts)}::jsonb,
            ${`<email-${id}@idem.local>`}, 'pending', 0, ${new Date(now.getTime() + FIRST_LOOK_MS)}::timestamptz,
            ${traceparentOf() ?? null}::text, ${now}::timestamptz, ${now}::timestamptz)
    ON CONFLICT DO NOTHING`;
}

/** The emails that wait for `orderId`'s summary, made due now (the summary is being written). */
const wakeWaitingEmails = (orderId: string, now: Date) => sql`
  UPDATE email_work_items SET next_attempt_at = ${now}::timestamptz
   WHERE order_id = ${orderId}::uuid AND status = 'pending' AND subject IS NULL AND lease_owner IS NULL`;

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
 * known, the email and the inbox's record are one statement. An order not known yet leaves the
 * email waiting for it (see {@link emailAboutOrder}): the delivery is processed, not retried.
 */
export function emailAboutOrderHandler<M extends AnyEnvelope & { body: { orderId: string } }>(
  kind: EmailAboutOrderKind,
  { now }: { now: () => Date },
): OneStatementHandler<Tx, M> {
  return Object.assign(
    async (message: M, tx: Tx) => {
      await emailAboutOrder(tx, message.body.orderId, kind, message.body, now());
      return processed;
    },
    {
      inOneStatement: (message: M, db: SqlClient) =>
        emailAboutOrderWrite(db, message.body.orderId, kind, message.body, now()),
    },
  );
}

const released = { leaseOwner: null, leaseExpiresAt: null } as const;

/**
 * The item's unconfirmed sends a lookup at the provider settled (`reconciled`: the count of them
 * it was asked after), recorded with what followed it.
 */
const settled = (reconciled: number | undefined) => (reconciled === undefined ? {} : { reconciledSends: reconciled });

/**
 * The SMTP server accepted the item's email (or a lookup found it had): it is sent, and never sent
 * again by a dispatcher that holds its lease. `overran`: the send ended after its lease had run
 * out, counted on the item.
 */
export async function recordSent(
  db: PrismaClient,
  item: { id: string },
  { overran, reconciled }: { overran: boolean; reconciled?: number },
  now: Date,
): Promise<void> {
  const overrun = overran ? { leaseOverruns: { increment: 1 } } : {};
  const { count } = await db.emailWorkItem.updateMany({
    where: { id: item.id, status: 'pending' },
    data: {
      ...released,
      ...overrun,
      ...settled(reconciled),
      status: 'sent',
      sentAt: now,
      lastError: null,
      updatedAt: now,
    },
  });
  if (count === 0 && overran) await db.emailWorkItem.updateMany({ where: { id: item.id }, data: overrun });
}

/**
 * A send failed: the item is retried later, or parked (see afterFailedSend); returns which. A send
 * the server may have taken all the same (`unconfirmed`) is counted: the copy a retry may make is
 * SMTP's documented limit, which the checker tells from any other.
 */
export async function recordFailedSend(
  db: PrismaClient,
  item: { id: string; attempts: number },
  failure: {
    responseCode: number;
    reason: string;
    unconfirmed: boolean;
    maxAttempts: number;
    retryDelayMs: number;
    reconciled?: number;
  },
  now: Date,
): Promise<'pending' | 'parked'> {
  const { status, retryInMs } = afterFailedSend(item, failure);
  await db.emailWorkItem.updateMany({
    where: { id: item.id, status: 'pending' },
    data: {
      ...released,
      ...(failure.unconfirmed ? { unconfirmedSends: { increment: 1 } } : {}),
      ...settled(failure.reconciled),
      status,
      lastError: boundReason(failure.reason),
      nextAttemptAt: new Date(now.getTime() + retryInMs),
      updatedAt: now,
    },
  });
  return status;
}

/** An email as it goes to the SMTP server. */
export interface Sendable {
  readonly toAddress: string;
  readonly subject: string;
  readonly text: string | null;
  readonly html: string | null;
}

/**
 * What a dispatcher holding `item` may do right before it sends: `held` — the item is its own for
 * longer than one send can take (`sendMs`), renewing the lease when less is left, and its text is
 * written (from the order's summary, for an email that waited for it); `lost` — its lease ran out
 * and another dispatcher may have it; `waiting` — its order is still not known here, so it is
 * given back, to be looked at again after a quarter of the time it has waited (1 s to a minute)
 * or when the summary wakes it.
 */
export async function holdForSending(
  db: PrismaClient,
  item: EmailWorkItem,
  { owner, leaseMs, sendMs, now }: { owner: string; leaseMs: number; sendMs: number; now: Date },
): Promise<{ kind: 'held'; email: Sendable; leaseExpiresAt: Date } | { kind: 'lost' } | { kind: 'waiting' }> {
  const leaseExpiresAt = item.leaseExpiresAt ?? now;
  if (item.subject !== null && item.toAddress !== null && leaseExpiresAt.getTime() - now.getTime() > sendMs)
    return { kind: 'held', email: asWritten(item), leaseExpiresAt };
  let email: Sendable | undefined;
  if (item.subject === null || item.toAddress === null) {
    const summary = await summaryOf(db, item.orderId);
    if (!summary) {
      const waitedMs = now.getTime() - item.createdAt.getTime();
      const lookAgainInMs = Math.min(60_000, Math.max(1_000, waitedMs / 4));
      await db.emailWorkItem.updateMany({
        where: { id: item.id, leaseOwner: owner },
        data: { ...released, attempts: { decrement: 1 }, nextAttemptAt: new Date(now.getTime() + lookAgainInMs) },
      });
      return { kind: 'waiting' };
    }
    const { subject, text, html } = writeEmailAboutOrder(item.kind, summary, item.facts);
    email = { toAddress: summary.customerEmail, subject, text, html };
  }
  const renewed = new Date(now.getTime() + leaseMs);
  const text = email ?? { toAddress: null, subject: null, text: null, html: null };
  const written = await execute(
    db,
    sql`
      UPDATE email_work_items
         SET lease_expires_at = ${renewed}::timestamptz, to_address = coalesce(to_address, ${text.toAddress}::text),
             subject = coalesce(subject, ${text.subject}::text), text_body = coalesce(text_body, ${text.text}::text),
             html_body = coalesce(html_body, ${text.html}::text), updated_at = ${now}::timestamptz
       WHERE id = ${item.id}::uuid AND status = 'pending' AND lease_owner = ${owner}
         AND lease_expires_at > ${now}::timestamptz`,
  );
  if (written === 0) return { kind: 'lost' };
  return { kind: 'held', email: email ?? asWritten(item), leaseExpiresAt: renewed };
}

const asWritten = (item: EmailWorkItem): Sendable => ({
  toAddress: item.toAddress!,
  subject: item.subject!,
  text: item.textBody,
  html: item.htmlBody,
});

/**
 * An item handed to this process's dispatcher at its commit that it cannot start sending now: its
 * lease (and the attempt it counted) goes back, so the next claim — this dispatcher's or
 * another's — takes it. Nothing waits in memory while its lease runs out.
 */
export async function giveBack(db: PrismaClient, item: { id: string }, owner: string): Promise<void> {
  await db.emailWorkItem.updateMany({
    where: { id: item.id, leaseOwner: owner, status: 'pending' },
    data: { ...released, attempts: { decrement: 1 } },
  });
}

/** An order's email work items, oldest first. */
export const emailWorkItemsOf = (db: PrismaClient, orderId: string) =>
  db.emailWorkItem.findMany({ where: { orderId }, orderBy: { createdAt: 'asc' } });
