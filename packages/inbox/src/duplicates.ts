import type { SqlClient } from '@idem/database';
import type { DeliveryOutcome } from './outcomes.js';

/** The same message id with a different body: a producer reused an id (a bug worth a look). */
export interface ConflictingDuplicate {
  readonly consumer: string;
  readonly messageId: string;
  readonly storedBodyHash: string;
  readonly receivedBodyHash: string;
}

/**
 * A duplicate's outcome (the article's step 4): it changes nothing; only a body other than the
 * one recorded under its id is worth reporting.
 */
export function duplicateOf(
  consumer: string,
  messageId: string,
  storedBodyHash: string | undefined,
  receivedBodyHash: string,
  report: (conflict: ConflictingDuplicate) => void,
): DeliveryOutcome {
  if (storedBodyHash === undefined || storedBodyHash === receivedBodyHash) return { outcome: 'duplicate' };
  report({ consumer, messageId, storedBodyHash, receivedBodyHash });
  return {
    outcome: 'conflicting_duplicate',
    reason: `message ${messageId} was already processed by ${consumer} with a different body (stored body hash ${storedBodyHash.slice(0, 12)}…, received ${receivedBodyHash.slice(0, 12)}…): the producer reused a message id`,
  };
}

/** The body hashes recorded for those of `ids` (lower-case uuids) this consumer has processed. */
export async function storedBodyHashes(
  client: SqlClient,
  consumer: string,
  ids: readonly string[],
): Promise<Map<string, string>> {
  const rows = await client.$queryRaw<{ id: string; body_hash: string }[]>`
    SELECT message_id::text AS id, body_hash FROM processed_messages
    WHERE consumer = ${consumer} AND message_id IN (SELECT jsonb_array_elements_text(${JSON.stringify(ids)}::jsonb)::uuid)`;
  return new Map(rows.map((row) => [row.id, row.body_hash]));
}

/**
 * The duplicate shortcut — an optimisation of the inbox's duplicate check that decides nothing.
 * Duplicates come in runs (a replay, a batch published again after a relay crash) and are rare
 * otherwise. After a duplicate, a consumer reads before it inserts, until a delivery turns out
 * to be new: a run of duplicates is answered without a transaction or a write, and first
 * deliveries in the steady state never pay for the read. Two deliveries at the same moment can
 * both read "absent"; the record's primary key decides then, as it always does. The tests that
 * show it changes no outcome: "answers a run of duplicates with a read and no transaction, and
 * still processes the next new message" (inbox.int.spec.ts) and "answers a run of duplicates
 * with one read and no transaction" (clients.int.spec.ts, group commit).
 */
export class DuplicateShortcut {
  readonly #arriving = new Set<string>();

  constructor(private readonly db: SqlClient) {}

  /** A duplicate arrived for this consumer: read first from now on. */
  seen(consumer: string): void {
    this.#arriving.add(consumer);
  }

  /**
   * While duplicates are arriving, the recorded body hashes of those of `ids` (lower-case) that
   * were processed; otherwise none. Once one of them is new, the reads stop. A read that fails is
   * only a shortcut missed: the insert still decides.
   */
  async processedAmong(consumer: string, ids: readonly string[]): Promise<Map<string, string>> {
    if (!this.#arriving.has(consumer) || ids.length === 0) return new Map();
    const stored = await storedBodyHashes(this.db, consumer, ids).catch(() => new Map<string, string>());
    if (ids.some((id) => !stored.has(id))) this.#arriving.delete(consumer);
    return stored;
  }
}
