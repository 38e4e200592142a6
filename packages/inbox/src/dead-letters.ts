import { createHash } from 'node:crypto';
import { boundReason } from '@idem/contracts';
import type { SqlClient } from '@idem/database';

/** A message that cannot be processed, kept with why, for inspection and replay. */
export interface DeadLetter {
  readonly consumer: string;
  /**
   * The envelope's message id (the delivery identity), or its job id for a delivery too
   * malformed to carry one.
   */
  readonly messageId: string;
  /** The broker's id for the delivery it came as (a BullMQ job id): another id than the message's for a republished copy. */
  readonly brokerId: string | null;
  /**
   * The message exactly as it was delivered (absent when listed without payloads); for a
   * truncated one, only the start of its JSON text.
   */
  readonly payload: unknown;
  /** The size of the delivered payload, as JSON text. */
  readonly payloadBytes: number;
  /** Kept only in part (over MAX_DEAD_LETTER_PAYLOAD_BYTES): not the message that was delivered. */
  readonly truncated: boolean;
  readonly code: string;
  readonly reason: string;
  readonly attempts: number;
  readonly deadLetteredAt: Date;
  readonly replayedAt: Date | null;
  readonly replayCount: number;
}

/** What is recorded when a message becomes a dead letter. */
export type NewDeadLetter = Pick<DeadLetter, 'consumer' | 'messageId' | 'payload' | 'code' | 'reason' | 'attempts'> &
  Partial<Pick<DeadLetter, 'brokerId'>>;

/** Where a page of dead letters ended: the next page starts after it. */
export type DeadLetterCursor = Pick<DeadLetter, 'deadLetteredAt' | 'consumer' | 'messageId'>;

/** Which dead letters to list: one consumer's, chosen ids, a page after a cursor. */
export interface DeadLetterFilter {
  readonly consumer?: string;
  /** Only these (chosen in the query, among every dead letter). */
  readonly messageIds?: readonly string[];
  readonly limit?: number;
  /** The page after this one. */
  readonly after?: DeadLetterCursor;
  /** With their payloads (replay needs them; a listing for people does not). @defaultValue true */
  readonly payloads?: boolean;
}

/** The dead-letter store: poison messages kept exactly as they came, until replayed. */
export interface DeadLetters {
  /** Keeps a dead letter; recording the same message again (after a replay) updates it. */
  record(deadLetter: NewDeadLetter): Promise<void>;
  /** Dead letters not replayed yet, oldest first. */
  list(filter?: DeadLetterFilter): Promise<DeadLetter[]>;
  /**
   * Counts a replay of a listed dead letter and takes it off the list — unless the replayed
   * message already failed again and was recorded anew since it was listed: then it stays.
   */
  markReplayed(deadLetter: Pick<DeadLetter, 'consumer' | 'messageId' | 'deadLetteredAt'>): Promise<void>;
}

interface DeadLetterRow {
  consumer: string;
  message_id: string;
  broker_id: string | null;
  payload_text: string | null;
  payload_bytes: number;
  payload_truncated: boolean;
  code: string;
  reason: string;
  attempts: number;
  dead_lettered_at: Date;
  replayed_at: Date | null;
  replay_count: number;
}

export function createDeadLetters(db: SqlClient, now: () => Date): DeadLetters {
  return {
    async record({ consumer, messageId, brokerId = null, payload, code, reason, attempts }) {
      const stored = storedPayload(payload);
      await db.$executeRaw`
        INSERT INTO dead_letters (consumer, message_id, broker_id, payload, payload_text, payload_bytes, payload_sha256,
                                  payload_truncated, code, reason, attempts, dead_lettered_at)
        VALUES (${consumer}, ${boundMessageId(messageId)}, ${brokerId === null ? null : boundMessageId(brokerId)}, ${stored.jsonb}::jsonb, ${stored.text}, ${stored.bytes},
                ${stored.sha256}, ${stored.truncated}, ${code}, ${storableText(boundReason(reason))}, ${attempts}, ${now()})
        ON CONFLICT (consumer, message_id) DO UPDATE
          SET broker_id = EXCLUDED.broker_id, payload = EXCLUDED.payload, payload_text = EXCLUDED.payload_text, payload_bytes = EXCLUDED.payload_bytes,
              payload_sha256 = EXCLUDED.payload_sha256, payload_truncated = EXCLUDED.payload_truncated,
              code = EXCLUDED.code, reason = EXCLUDED.reason,
              attempts = EXCLUDED.attempts, dead_lettered_at = EXCLUDED.dead_lettered_at, replayed_at = NULL`;
    },
    async list({ consumer, messageIds, limit = 100, after, payloads = true } = {}) {
      const ids = messageIds ? [...messageIds] : null;
      const rows = await db.$queryRaw<DeadLetterRow[]>`
        SELECT consumer, message_id, broker_id, CASE WHEN ${payloads} THEN payload_text END AS payload_text,
               payload_bytes, payload_truncated,
               code, reason, attempts, dead_lettered_at, replayed_at, replay_count
          FROM dead_letters
         WHERE replayed_at IS NULL AND (${consumer ?? null}::text IS NULL OR consumer = ${consumer ?? null})
           AND (${ids}::text[] IS NULL OR message_id = ANY(${ids}::text[]))
           AND (${after?.deadLetteredAt ?? null}::timestamptz IS NULL
                OR (dead_lettered_at, consumer, message_id)
                   > (${after?.deadLetteredAt ?? null}::timestamptz, ${after?.consumer ?? ''}, ${after?.messageId ?? ''}))
         ORDER BY dead_lettered_at, consumer, message_id
         LIMIT ${limit}`;
      return rows.map((row) => ({
        consumer: row.consumer,
        messageId: row.message_id,
        brokerId: row.broker_id,
        payload:
          row.payload_text === null || row.payload_truncated
            ? row.payload_text
            : (JSON.parse(row.payload_text) as unknown),
        payloadBytes: row.payload_bytes,
        truncated: row.payload_truncated,
        code: row.code,
        reason: row.reason,
        attempts: row.attempts,
        deadLetteredAt: row.dead_lettered_at,
        replayedAt: row.replayed_at,
        replayCount: row.replay_count,
      }));
    },
    async markReplayed({ consumer, messageId, deadLetteredAt }) {
      await db.$executeRaw`
        UPDATE dead_letters
           SET replay_count = replay_count + 1,
               replayed_at = CASE WHEN dead_lettered_at = ${deadLetteredAt} THEN ${now()} ELSE replayed_at END
         WHERE consumer = ${consumer} AND message_id = ${messageId}`;
    },
  };
}

/** The most of a payload a dead letter keeps; a larger one keeps its start, its size and its hash. */
export const MAX_DEAD_LETTER_PAYLOAD_BYTES = 64 * 1024;

/**
 * What a dead letter stores of a payload: the JSON text it was delivered as, in its own column
 * (JSON's escapes keep a NUL or a lone surrogate as plain text PostgreSQL stores), so it comes
 * back exactly, whatever shape it has; the same as jsonb where jsonb takes it, for queries; and a
 * payload over the bound only as its start, its size and its hash (`truncated`).
 */
function storedPayload(payload: unknown) {
  const text = JSON.stringify(payload ?? null) ?? 'null';
  const bytes = Buffer.byteLength(text);
  const truncated = bytes > MAX_DEAD_LETTER_PAYLOAD_BYTES;
  return {
    text: truncated ? storableText(text.slice(0, MAX_DEAD_LETTER_PAYLOAD_BYTES / 4)) : text,
    jsonb: truncated || jsonbRefuses(payload) ? null : text,
    bytes,
    sha256: createHash('sha256').update(text).digest('hex'),
    truncated,
  };
}

/** A NUL, or a surrogate that is not half of a pair, anywhere in a string or a key. */
// eslint-disable-next-line no-control-regex -- the NUL is exactly what PostgreSQL refuses
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function jsonbRefuses(value: unknown): boolean {
  if (typeof value === 'string') return UNSTORABLE.test(value);
  if (Array.isArray(value)) return value.some(jsonbRefuses);
  if (value && typeof value === 'object') {
    return Object.entries(value).some(([key, item]) => UNSTORABLE.test(key) || jsonbRefuses(item));
  }
  return false;
}

/** Text for a text column: what PostgreSQL refuses becomes U+FFFD (a reason quotes the bad input). */
function storableText(text: string): string {
  return text.replace(new RegExp(UNSTORABLE.source, 'g'), '\uFFFD');
}

/** A broker job id can be anything a producer chose; the key column keeps a bounded, storable form. */
function boundMessageId(messageId: string): string {
  const clean = storableText(messageId);
  return clean.length > 200 ? `${clean.slice(0, 200)}…` : clean;
}
