import { SERVICES, type Service } from '@idem/checker';
import { isEventType, serviceOf, subscribersOf, type ConsumerName } from '@idem/contracts';
import { readJournal, type DeliveryEntry, type JournalEntry, type ProviderCallEntry } from '@idem/messaging';
import type { Redis } from 'ioredis';
import pg from 'pg';

/**
 * Everything the console shows, read from what the system records: each service's database in
 * read-only transactions, the delivery journal in Redis, the mail server's API. It writes nothing.
 */
export interface Sources {
  readonly databases: Record<Service, pg.Pool>;
  readonly redis: Redis;
  readonly prefix: string;
  /** A Mailpit-compatible API, for the SMTP sends. */
  readonly mailApi?: string;
}

export function connectDatabases(urls: Record<Service, string>): Record<Service, pg.Pool> {
  return Object.fromEntries(
    SERVICES.map((service) => [service, new pg.Pool({ connectionString: urls[service], max: 3 })]),
  ) as Record<Service, pg.Pool>;
}

async function readOnly<R extends pg.QueryResultRow>(pool: pg.Pool, sql: string, params: unknown[] = []): Promise<R[]> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN TRANSACTION READ ONLY');
    const { rows } = await client.query<R>(sql, params);
    await client.query('COMMIT');
    return rows;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}

export interface OrderRow {
  id: string;
  status: string;
  customer_email: string;
  total_cents: number;
  currency: string;
  created_at: Date;
}

export function latestOrders(sources: Sources, limit = 30): Promise<OrderRow[]> {
  return readOnly<OrderRow>(
    sources.databases.orders,
    `SELECT id, status, customer_email, total_cents, currency, created_at FROM orders ORDER BY created_at DESC LIMIT $1`,
    [limit],
  );
}

/** One subscriber's side of a message: its inbox record, and every delivery attempt the journal saw. */
export interface SubscriberView {
  readonly consumer: ConsumerName;
  readonly service: string;
  /** When the processed-message record committed (absent: not processed, or dead-lettered). */
  readonly processedAt?: Date;
  readonly deadLettered?: { code: string; reason: string };
  readonly deliveries: DeliveryEntry[];
}

export interface MessageView {
  readonly messageId: string;
  readonly contract: string;
  readonly producer: string;
  readonly causationId: string | null;
  readonly createdAt: Date;
  readonly publishedAt: Date | null;
  /** Times the relay handed it to the broker, and the copies that went out each time. */
  readonly publications: { at: string; copies: number }[];
  readonly subscribers: SubscriberView[];
}

export interface EmailView {
  readonly kind: string;
  readonly messageId: string;
  readonly status: string;
  readonly attempts: number;
  readonly sentAt: Date | null;
  /** How many messages the mail server holds with this Message-ID (2 = sent twice). */
  readonly sends: number | undefined;
}

export interface Timeline {
  readonly order: OrderRow & { lines: { sku: string; quantity: number }[] };
  readonly history: { version: number; status: string; causation_id: string | null; occurred_at: Date }[];
  readonly correlationId: string | undefined;
  readonly messages: MessageView[];
  readonly payment?: {
    status: string;
    idempotency_key: string;
    payment_intent_id: string | null;
    provider_calls: number;
  };
  readonly providerCalls: ProviderCallEntry[];
  readonly reservation?: { status: string; created_at: Date; released_at: Date | null };
  readonly emails: EmailView[];
  /** The journal's newest entry id, so a live view knows where to continue. */
  readonly journalId: string | undefined;
}

interface OutboxRow {
  message_id: string;
  type: string;
  envelope: { producer: string; causationId: string | null; correlationId: string };
  created_at: Date;
  published_at: Date | null;
}

/** One order's whole story: every message of its correlation id in causal order, with each delivery. */
export async function orderTimeline(sources: Sources, orderId: string): Promise<Timeline | undefined> {
  const { databases } = sources;
  const [order] = await readOnly<OrderRow>(
    databases.orders,
    `SELECT id, status, customer_email, total_cents, currency, created_at FROM orders WHERE id = $1`,
    [orderId],
  );
  if (!order) return undefined;
  const [lines, history, [placed]] = await Promise.all([
    readOnly<{ sku: string; quantity: number }>(
      databases.orders,
      `SELECT sku, quantity FROM order_lines WHERE order_id = $1 ORDER BY line_no`,
      [orderId],
    ),
    readOnly<Timeline['history'][number]>(
      databases.orders,
      `SELECT version, status, causation_id, occurred_at FROM order_status_changes WHERE order_id = $1 ORDER BY version`,
      [orderId],
    ),
    readOnly<{ correlation_id: string }>(
      databases.orders,
      `SELECT envelope->>'correlationId' AS correlation_id FROM outbox_messages
        WHERE type = 'orders.order-placed.v1' AND envelope->>'aggregateId' = $1`,
      [orderId],
    ),
  ]);
  const correlationId = placed?.correlation_id;

  const outbox = correlationId
    ? (
        await Promise.all(
          SERVICES.filter((s) => s !== 'notifications').map((service) =>
            readOnly<OutboxRow>(
              databases[service],
              `SELECT message_id, type, envelope, created_at, published_at FROM outbox_messages
                WHERE envelope->>'correlationId' = $1`,
              [correlationId],
            ),
          ),
        )
      ).flat()
    : [];
  const messageIds = outbox.map((row) => row.message_id);
  const [processed, deadLetters] = await Promise.all([
    Promise.all(
      SERVICES.map((service) =>
        readOnly<{ consumer: string; message_id: string; processed_at: Date }>(
          databases[service],
          `SELECT consumer, message_id, processed_at FROM processed_messages WHERE message_id = ANY($1::uuid[])`,
          [messageIds],
        ),
      ),
    ).then((rows) => rows.flat()),
    Promise.all(
      SERVICES.map((service) =>
        readOnly<{ consumer: string; message_id: string; code: string; reason: string }>(
          databases[service],
          `SELECT consumer, message_id, code, reason FROM dead_letters WHERE message_id = ANY($1::text[]) AND replayed_at IS NULL`,
          [messageIds],
        ),
      ),
    ).then((rows) => rows.flat()),
  ]);
  const journal = await readJournal(sources.redis, sources.prefix);
  const ours = journal.filter((e) => correlationId !== undefined && e.entry.correlationId === correlationId);

  const messages: MessageView[] = outbox
    .sort((a, b) => a.created_at.getTime() - b.created_at.getTime())
    .map((row) => ({
      messageId: row.message_id,
      contract: row.type,
      producer: row.envelope.producer,
      causationId: row.envelope.causationId,
      createdAt: row.created_at,
      publishedAt: row.published_at,
      publications: ours
        .map((e) => e.entry)
        .filter((e) => e.kind === 'publication' && e.messageId === row.message_id)
        .map((e) => ({ at: e.at, copies: e.kind === 'publication' ? e.copies : 0 })),
      subscribers: (isEventType(row.type) ? [...subscribersOf(row.type)] : []).map((consumer: ConsumerName) => {
        const dead = deadLetters.find((d) => d.consumer === consumer && d.message_id === row.message_id);
        return {
          consumer,
          service: serviceOf(consumer),
          processedAt: processed.find((p) => p.consumer === consumer && p.message_id === row.message_id)?.processed_at,
          ...(dead ? { deadLettered: { code: dead.code, reason: dead.reason } } : {}),
          deliveries: ours
            .map((e) => e.entry)
            .filter(
              (e): e is DeliveryEntry =>
                e.kind === 'delivery' && e.consumer === consumer && e.messageId === row.message_id,
            ),
        };
      }),
    }));

  const [[payment], [reservation], emails] = await Promise.all([
    readOnly<NonNullable<Timeline['payment']>>(
      databases.payments,
      `SELECT status, idempotency_key, payment_intent_id, provider_calls FROM payment_attempts WHERE order_id = $1`,
      [orderId],
    ),
    readOnly<NonNullable<Timeline['reservation']>>(
      databases.inventory,
      `SELECT status, created_at, released_at FROM reservations WHERE order_id = $1`,
      [orderId],
    ),
    readOnly<{ kind: string; message_id: string; status: string; attempts: number; sent_at: Date | null }>(
      databases.notifications,
      `SELECT kind, message_id, status, attempts, sent_at FROM email_work_items WHERE order_id = $1 ORDER BY created_at`,
      [orderId],
    ),
  ]);
  const sends = await mailSends(sources.mailApi);
  return {
    order: { ...order, lines },
    history,
    correlationId,
    messages,
    payment,
    reservation,
    providerCalls: ours.map((e) => e.entry).filter((e): e is ProviderCallEntry => e.kind === 'provider-call'),
    emails: emails.map((e) => ({
      kind: e.kind,
      messageId: e.message_id,
      status: e.status,
      attempts: e.attempts,
      sentAt: e.sent_at,
      sends: sends?.filter((id) => id === bare(e.message_id)).length,
    })),
    journalId: journal.at(-1)?.id,
  };
}

/** A Message-ID without its angle brackets (Mailpit lists them bare). */
const bare = (messageId: string) => messageId.replace(/^<|>$/g, '');

/** The Message-IDs of every message the mail server holds (undefined when it cannot be read). */
async function mailSends(mailApi: string | undefined): Promise<string[] | undefined> {
  if (!mailApi) return undefined;
  try {
    const res = await fetch(`${mailApi}/api/v1/messages?limit=1000`);
    if (!res.ok) return undefined;
    const { messages } = (await res.json()) as { messages: { MessageID: string }[] };
    return messages.map((m) => bare(m.MessageID));
  } catch {
    return undefined;
  }
}

/** Journal entries newer than `after` that belong to `correlationId` (for the live view). */
export async function newEntries(
  sources: Sources,
  correlationId: string | undefined,
  after: string | undefined,
): Promise<{ last: string | undefined; entries: JournalEntry[] }> {
  const rows = await readJournal(sources.redis, sources.prefix, { after, count: 5_000 });
  return {
    last: rows.at(-1)?.id ?? after,
    entries: rows.map((r) => r.entry).filter((e) => e.correlationId === correlationId),
  };
}
