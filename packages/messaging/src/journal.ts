import type { AnyEnvelope } from '@idem/contracts';
import type { DeliveryReport } from './consumer.js';
import type { RedisClient } from './redis.js';

/**
 * What the system did with each message, for people to look at (the teaching console): every
 * delivery attempt with its outcome — duplicates included, which leave no database row — and
 * every call to an external provider. A capped Redis stream per service
 * (`<prefix>:journal:<service>`): each service's Redis user may write its own stream only, so no
 * service can write entries in another's name.
 *
 * It is lossy by design and can never affect the guarantee: entries are written after the
 * broker settled the delivery, in the background, batched, never awaited by the consumer, and
 * dropped when Redis is slow or down. Nothing reads it to decide anything.
 */
export type JournalEntry = PublicationEntry | DeliveryEntry | ProviderCallEntry;

/** A message the relay handed to the broker (again, after a crash; twice, under publish-twice). */
export interface PublicationEntry {
  readonly kind: 'publication';
  readonly at: string;
  readonly process: string;
  readonly messageId: string;
  readonly contract: string;
  readonly producer: string;
  readonly correlationId: string;
  /** Copies of it that went out in this publication (2 under the publish-twice fault). */
  readonly copies: number;
}

/** A delivery as the journal keeps it: the ids a person needs to follow it, and how it ended. */
export type DeliveryEntry = { readonly kind: 'delivery'; readonly at: string; readonly process: string } & ReturnType<
  typeof deliveryFields
> & { readonly deadLettered: boolean };

/** A call to an outside provider (a charge, an email), as the journal records it. */
export interface ProviderCallEntry {
  readonly kind: 'provider-call';
  readonly at: string;
  readonly process: string;
  readonly correlationId: string;
  readonly orderId: string;
  readonly operation: 'charge' | 'refund';
  /** The persisted idempotency key the call carried. */
  readonly idempotencyKey: string;
  /** The PaymentIntent or refund id, when the provider answered with one. */
  readonly objectId?: string;
  /** The provider answered `Idempotent-Replayed: true`: an earlier call with this key had already done it. */
  readonly replayed: boolean;
  /** succeeded, declined, rejected or retry. */
  readonly result: string;
}

/** A service's journal stream: one per service of a system (queue prefix). */
export const journalKey = (prefix: string, service: string) => `${prefix}:journal:${service}`;

/** Records each delivery and provider call so that a tool can show what happened to a message. */
export interface DeliveryJournal {
  record(entry: JournalEntry): void;
  /** Writes what is buffered (tests, shutdown). */
  flush(): Promise<void>;
  close(): Promise<void>;
}

export interface DeliveryJournalOptions {
  readonly redis: RedisClient;
  readonly prefix: string;
  /** The service whose stream it writes. */
  readonly service: string;
  /**
   * About how many entries the service's stream keeps (trimmed approximately): with four services,
   * the 20,000 the one stream of the whole system kept before each service had its own, so the
   * journal takes no more of a Redis that evicts nothing. @defaultValue 5 000
   */
  readonly maxLength?: number;
  /** How long an entry waits to be written, with those that come after it. @defaultValue 100 */
  readonly flushIntervalMs?: number;
  /** Entries held while Redis is slow; past it the oldest are dropped. @defaultValue 5 000 */
  readonly maxBuffered?: number;
}

/** A journal in a capped Redis stream, written in batches; a development aid (DELIVERY_JOURNAL). */
export function createDeliveryJournal({
  redis,
  prefix,
  service,
  maxLength = 5_000,
  flushIntervalMs = 100,
  maxBuffered = 5_000,
}: DeliveryJournalOptions): DeliveryJournal {
  const key = journalKey(prefix, service);
  let buffer: JournalEntry[] = [];
  let writing: Promise<void> = Promise.resolve();

  // A flush is scheduled by the first entry after the last one: an idle process is not woken.
  let scheduled: NodeJS.Timeout | undefined;
  const flush = () => {
    clearTimeout(scheduled);
    scheduled = undefined;
    if (buffer.length === 0) return writing;
    const entries = buffer;
    buffer = [];
    const pipeline = redis.pipeline();
    for (const entry of entries) pipeline.xadd(key, 'MAXLEN', '~', maxLength, '*', 'entry', JSON.stringify(entry));
    writing = writing.then(() =>
      pipeline.exec().then(
        () => undefined,
        () => undefined, // lossy by design: a journal that cannot be written is skipped
      ),
    );
    return writing;
  };

  return {
    record(entry) {
      buffer.push(entry);
      if (buffer.length > maxBuffered) buffer.splice(0, buffer.length - maxBuffered);
      if (scheduled) return;
      scheduled = setTimeout(() => void flush(), flushIntervalMs);
      scheduled.unref();
    },
    flush,
    close: flush,
  };
}

/** Publications as journal entries. */
export function publicationEntries(
  envelopes: readonly AnyEnvelope[],
  copies: number,
  process: string,
  at = new Date(),
): PublicationEntry[] {
  return envelopes.map((envelope) => ({
    kind: 'publication',
    at: at.toISOString(),
    process,
    messageId: envelope.messageId,
    contract: envelope.type,
    producer: envelope.producer,
    correlationId: envelope.correlationId,
    copies,
  }));
}

/**
 * A delivery's fields for people: the ids to follow it through the system and how it ended
 * (the journal's entries and the delivery log lines are both made of them).
 */
export function deliveryFields(report: DeliveryReport) {
  const { outcome } = report;
  return {
    consumer: report.consumer,
    contract: report.contract,
    producer: report.producer,
    messageId: report.messageId,
    correlationId: report.correlationId,
    causationId: report.causationId,
    attempt: report.attempt,
    durationMs: Math.round(report.durationMs * 10) / 10,
    /** processed, duplicate, stale, conflicting_duplicate, transient_failure or permanent_failure. */
    outcome: outcome.outcome,
    ...('code' in outcome ? { code: outcome.code } : {}),
    ...('reason' in outcome ? { reason: outcome.reason } : {}),
  };
}

/** A delivery report as a journal entry. */
export function deliveryEntry(report: DeliveryReport, process: string, at = new Date()): DeliveryEntry {
  return {
    kind: 'delivery',
    at: at.toISOString(),
    process,
    ...deliveryFields(report),
    deadLettered: report.deadLettered,
  };
}

/** Where a reader of the journal stands: the last stream id it read of each service's stream. */
export type JournalCursor = Readonly<Record<string, string>>;

/**
 * The entries of the `services`' streams, oldest first (merged by stream id, which is the time
 * Redis added them), and where they end; with `after`, only those newer than it. An entry that is
 * not a journal entry (written by hand, or by another version) is left out.
 */
export async function readJournal(
  redis: RedisClient,
  prefix: string,
  services: readonly string[],
  { after = {}, count = 20_000 }: { after?: JournalCursor; count?: number } = {},
): Promise<{ entries: JournalEntry[]; cursor: JournalCursor }> {
  const streams = await Promise.all(
    services.map(async (service) => {
      const from = after[service];
      const rows = await redis.xrange(journalKey(prefix, service), from ? `(${from}` : '-', '+', 'COUNT', count);
      return { service, rows };
    }),
  );
  const cursor = { ...after };
  for (const { service, rows } of streams) if (rows.length) cursor[service] = rows.at(-1)![0];
  const entries = streams
    .flatMap(({ rows }) => rows.map(([id, fields]) => ({ time: streamTime(id), entry: parsedEntry(fields[1]) })))
    .filter((row): row is { time: [number, number]; entry: JournalEntry } => row.entry !== undefined)
    .sort((a, b) => a.time[0] - b.time[0] || a.time[1] - b.time[1])
    .map((row) => row.entry);
  return { entries, cursor };
}

/** A stream id (`<ms>-<seq>`) as numbers, for ordering. */
const streamTime = (id: string): [number, number] => {
  const [ms = 0, seq = 0] = id.split('-').map(Number);
  return [ms, seq];
};

function parsedEntry(text: string | undefined): JournalEntry | undefined {
  try {
    const entry: unknown = JSON.parse(text ?? '');
    return isJournalEntry(entry) ? entry : undefined;
  } catch {
    return undefined;
  }
}

/** What each kind of entry holds, field by field (`?` after a type: it may be left out). */
const SHAPES: Record<JournalEntry['kind'], Record<string, string>> = {
  publication: {
    messageId: 'string',
    contract: 'string',
    producer: 'string',
    correlationId: 'string',
    copies: 'number',
  },
  delivery: {
    consumer: 'string',
    contract: 'string',
    producer: 'string',
    messageId: 'string',
    correlationId: 'string',
    causationId: 'string?',
    attempt: 'number',
    durationMs: 'number',
    outcome: 'string',
    code: 'string?',
    reason: 'string?',
    deadLettered: 'boolean',
  },
  'provider-call': {
    correlationId: 'string',
    orderId: 'string',
    operation: 'string',
    idempotencyKey: 'string',
    objectId: 'string?',
    replayed: 'boolean',
    result: 'string',
  },
};

/**
 * Whether a stream entry is a journal entry as the processes write them: its kind, a valid time,
 * every field of its kind of the type it is written with (a number a number, never markup's
 * place). Anyone who can write the stream can write anything: what is not an entry is skipped.
 */
function isJournalEntry(value: unknown): value is JournalEntry {
  if (typeof value !== 'object' || value === null) return false;
  const entry = value as Record<string, unknown>;
  const shape = SHAPES[entry.kind as JournalEntry['kind']];
  if (!shape || typeof entry.process !== 'string' || typeof entry.at !== 'string') return false;
  if (Number.isNaN(Date.parse(entry.at))) return false;
  return Object.entries(shape).every(([field, type]) => {
    const present = entry[field];
    if (type.endsWith('?') && (present === undefined || present === null)) return true;
    const expected = type.replace('?', '');
    return typeof present === expected && (expected !== 'number' || Number.isFinite(present));
  });
}
