import { fetchMailApi, SERVICES, type Service } from '@idem/checker';
import { serviceOf } from '@idem/contracts';
import { isEventType, subscribersOf, type ConsumerName } from '@idem/shop';
import {
  readJournal,
  type DeliveryEntry,
  type JournalCursor,
  type JournalEntry,
  type ProviderCallEntry,
  type RedisClient,
} from '@idem/messaging';
import { createPool, readOnly } from '@idem/database';
import type pg from 'pg';

/**
 * Everything the console shows, read from what the system records: each service's database in
 * read-only transactions, the delivery journal in Redis, the mail server's API. It writes nothing.
 */
export interface Sources {
  readonly databases: Record<Service, pg.Pool>;
  readonly redis: RedisClient;
  readonly prefix: string;
  /** A Mailpit-compatible API, for the SMTP sends; a login in it is sent as basic authentication. */
  readonly mailApi?: string;
  /** The operator token, for a mail sink that serves a network (it then answers to nothing else). */
  readonly mailApiToken?: string;
  /**
   * The consumers' broker lock (CONSUMER_LOCK_MS): an inbox record older than this whose
   * delivery the journal never saw settle was committed by a process that died. @defaultValue 30000
   */
  readonly consumerLockMs?: number;
}

/** An order's journal entries so far, and where to read on from. */
export interface JournalSoFar {
  readonly entries: readonly JournalEntry[];
  readonly cursor: JournalCursor;
}

export function connectDatabases(urls: Record<Service, string>): Record<Service, pg.Pool> {
  return Object.fromEntries(
    SERVICES.map((service) => [service, createPool({ connectionString: urls[service], max: 3 })]),
  ) as Record<Service, pg.Pool>;
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
  return readOnly(sources.databases.orders, (query) =>
    query<OrderRow>(
      `SELECT id, status, customer_email, total_cents, currency, created_at FROM orders ORDER BY created_at DESC LIMIT $1`,
      [limit],
    ),
  );
}

/** One subscriber's side of a message: its inbox record, and every delivery attempt the journal saw. */
export interface SubscriberView {
  readonly consumer: ConsumerName;
  readonly service: string;
  /** When the processed-message record committed (absent: not processed, or dead-lettered). */
  readonly processedAt?: Date;
  /**
   * For a record whose settled delivery the journal has not seen: `settling` while the process
   * that committed it may still settle it (the journal is written after settlement, in
   * batches), `never_settled` once its broker lock has expired (the process died).
   */
  readonly unsettled?: 'settling' | 'never_settled';
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
  /** This order's journal entries and where the journal stood, so a live view reads only what is newer. */
  readonly journal: JournalSoFar;
}

/** What the order did in each service beyond its inbox: the payment attempt, the reservation, the emails. */
const EFFECTS: Partial<Record<Service, string>> = {
  payments: `SELECT status, idempotency_key, payment_intent_id, provider_calls FROM payment_attempts WHERE order_id = $1`,
  inventory: `SELECT status, created_at, released_at FROM reservations WHERE order_id = $1`,
  notifications: `SELECT kind, message_id, status, attempts, sent_at FROM email_work_items
                   WHERE order_id = $1 ORDER BY created_at`,
};

interface PerService {
  processed: { consumer: string; message_id: string; processed_at: Date }[];
  deadLetters: { consumer: string; message_id: string; code: string; reason: string }[];
  effects: Record<string, unknown>[];
}

interface OutboxRow {
  message_id: string;
  type: string;
  envelope: { producer: string; causationId: string | null; correlationId: string };
  created_at: Date;
  published_at: Date | null;
}

/**
 * One order's whole story: every message of its correlation id in causal order, with each
 * delivery. The journal is read whole on the first call; a live view passes what it has
 * (`known`) and the journal is not read at all.
 */
export async function orderTimeline(
  sources: Sources,
  orderId: string,
  known?: JournalSoFar,
  now = new Date(),
): Promise<Timeline | undefined> {
  const { databases } = sources;
  // The orders database first: the order, and the correlation id its first event carries.
  const placed = await readOnly(databases.orders, async (query) => {
    const [order] = await query<OrderRow>(
      `SELECT id, status, customer_email, total_cents, currency, created_at FROM orders WHERE id = $1`,
      [orderId],
    );
    if (!order) return undefined;
    const lines = await query<{ sku: string; quantity: number }>(
      `SELECT sku, quantity FROM order_lines WHERE order_id = $1 ORDER BY line_no`,
      [orderId],
    );
    const history = await query<Timeline['history'][number]>(
      `SELECT version, status, causation_id, occurred_at FROM order_status_changes WHERE order_id = $1 ORDER BY version`,
      [orderId],
    );
    const [first] = await query<{ correlation_id: string }>(
      `SELECT envelope->>'correlationId' AS correlation_id FROM outbox_messages
        WHERE type = 'orders.order-placed.v1' AND envelope->>'aggregateId' = $1`,
      [orderId],
    );
    return { order, lines, history, correlationId: first?.correlation_id };
  });
  if (!placed) return undefined;
  const { order, lines, history, correlationId } = placed;

  // Then every message of that correlation id, from each producer's outbox …
  const outbox = correlationId
    ? (
        await Promise.all(
          SERVICES.filter((s) => s !== 'notifications').map((service) =>
            readOnly(databases[service], (query) =>
              query<OutboxRow>(
                `SELECT message_id, type, envelope, created_at, published_at FROM outbox_messages
                  WHERE envelope->>'correlationId' = $1`,
                [correlationId],
              ),
            ),
          ),
        )
      ).flat()
    : [];
  const messageIds = outbox.map((row) => row.message_id);
  // … and, in one read of each service's database, its inbox records and dead letters for
  // those messages and the order's effects there.
  const [orders, inventory, payments, notifications] = (await Promise.all(
    SERVICES.map((service) =>
      readOnly(databases[service], async (query) => {
        const effects = EFFECTS[service];
        return {
          processed: await query<PerService['processed'][number]>(
            `SELECT consumer, message_id, processed_at FROM processed_messages WHERE message_id = ANY($1::uuid[])`,
            [messageIds],
          ),
          deadLetters: await query<PerService['deadLetters'][number]>(
            `SELECT consumer, message_id, code, reason FROM dead_letters
              WHERE message_id = ANY($1::text[]) AND replayed_at IS NULL`,
            [messageIds],
          ),
          effects: effects ? await query(effects, [orderId]) : [],
        };
      }),
    ),
  )) as [PerService, PerService, PerService, PerService];
  const processed = [orders, inventory, payments, notifications].flatMap((db) => db.processed);
  const deadLetters = [orders, inventory, payments, notifications].flatMap((db) => db.deadLetters);
  const payment = payments.effects[0] as Timeline['payment'];
  const reservation = inventory.effects[0] as Timeline['reservation'];
  const emails = notifications.effects as {
    kind: string;
    message_id: string;
    status: string;
    attempts: number;
    sent_at: Date | null;
  }[];

  const journal = known ?? (await ourJournal(sources, correlationId));
  const ours = journal.entries;
  const lockMs = sources.consumerLockMs ?? 30_000;

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
        .filter((e) => e.kind === 'publication' && e.messageId === row.message_id)
        .map((e) => ({ at: e.at, copies: e.kind === 'publication' ? e.copies : 0 })),
      subscribers: (isEventType(row.type) ? [...subscribersOf(row.type)] : []).map((consumer: ConsumerName) => {
        const dead = deadLetters.find((d) => d.consumer === consumer && d.message_id === row.message_id);
        const processedAt = processed.find(
          (p) => p.consumer === consumer && p.message_id === row.message_id,
        )?.processed_at;
        const deliveries = ours.filter(
          (e): e is DeliveryEntry => e.kind === 'delivery' && e.consumer === consumer && e.messageId === row.message_id,
        );
        const settled = deliveries.some((d) => d.outcome === 'processed');
        return {
          consumer,
          service: serviceOf(consumer),
          processedAt,
          ...(processedAt && !settled
            ? { unsettled: now.getTime() - processedAt.getTime() > lockMs ? 'never_settled' : 'settling' }
            : {}),
          ...(dead ? { deadLettered: { code: dead.code, reason: dead.reason } } : {}),
          deliveries,
        } satisfies SubscriberView;
      }),
    }));

  const sends = await mailSends(sources.mailApi, sources.mailApiToken);
  return {
    order: { ...order, lines },
    history,
    correlationId,
    messages,
    payment,
    reservation,
    providerCalls: ours.filter((e): e is ProviderCallEntry => e.kind === 'provider-call'),
    emails: emails.map((e) => ({
      kind: e.kind,
      messageId: e.message_id,
      status: e.status,
      attempts: e.attempts,
      sentAt: e.sent_at,
      sends: sends?.filter((id) => id === bare(e.message_id)).length,
    })),
    journal,
  };
}

/** Every journal entry of one correlation id, and where the journal stands. */
async function ourJournal(sources: Sources, correlationId: string | undefined): Promise<JournalSoFar> {
  const { entries, cursor } = await readJournal(sources.redis, sources.prefix, SERVICES);
  return { entries: entries.filter((e) => correlationId !== undefined && e.correlationId === correlationId), cursor };
}

/** A Message-ID without its angle brackets (Mailpit lists them bare). */
const bare = (messageId: string) => messageId.replace(/^<|>$/g, '');

/** The Message-IDs of every message the mail server holds (undefined when it cannot be read). */
async function mailSends(mailApi: string | undefined, token: string | undefined): Promise<string[] | undefined> {
  if (!mailApi) return undefined;
  try {
    const res = await fetchMailApi(mailApi, '/api/v1/messages?limit=1000', token);
    if (!res.ok) return undefined;
    const { messages } = (await res.json()) as { messages: { MessageID: string }[] };
    return messages.map((m) => bare(m.MessageID));
  } catch {
    return undefined;
  }
}

/**
 * The journal so far with what is newer than it, for the live view: only entries after
 * `known.cursor` are read. Returns whether any of them is this order's.
 */
export async function withNewEntries(
  sources: Sources,
  correlationId: string | undefined,
  known: JournalSoFar,
): Promise<{ journal: JournalSoFar; changed: boolean }> {
  const { entries, cursor } = await readJournal(sources.redis, sources.prefix, SERVICES, {
    after: known.cursor,
    count: 5_000,
  });
  const fresh = entries.filter((e) => correlationId !== undefined && e.correlationId === correlationId);
  return { journal: { entries: [...known.entries, ...fresh], cursor }, changed: fresh.length > 0 };
}
