import type { Envelope } from '@idem/contracts';
import { boundReason } from '@idem/contracts';
import { noFaults, type Faults } from '@idem/faults';
import { bodyHash } from './body-hash.js';
import { classifyFailure, isProcessedMessageConflict } from './database-errors.js';
import { createDeadLetters, type DeadLetters } from './dead-letters.js';
import { consumeTheWrongWay, INBOX_MISTAKES, type InboxMistake } from './mistakes.js';
import type { DeliveryOutcome, HandlerResult } from './outcomes.js';
import type { SqlClient, TransactionalClient, TransactionOptions } from '@idem/database';

/** Business code for one consumer: runs inside the inbox transaction, with that transaction. */
export type MessageHandler<Tx, M extends Envelope = Envelope> = (message: M, tx: Tx) => Promise<HandlerResult>;

export interface InboxOptions<Tx extends SqlClient> {
  /** The service's Prisma client. */
  readonly db: TransactionalClient<Tx>;
  /** @defaultValue () => new Date() */
  readonly now?: () => Date;
  /** @defaultValue no faults */
  readonly faults?: Faults;
  readonly transaction?: TransactionOptions;
  /** Called for a conflicting duplicate (same message id, different body): a producer bug. */
  readonly onConflictingDuplicate?: (details: ConflictingDuplicate) => void;
}

export interface ConflictingDuplicate {
  readonly consumer: string;
  readonly messageId: string;
  readonly storedBodyHash: string;
  readonly receivedBodyHash: string;
}

export interface Inbox<Tx extends SqlClient> {
  /**
   * The idempotent consumer (the article's steps 3–7): in one transaction, record
   * `(consumer, message_id)` and apply the handler's business change, then commit both.
   * Returns the delivery's outcome; the caller settles the broker delivery only after this
   * resolves, i.e. after the commit.
   */
  consume<M extends Envelope>(consumer: string, message: M, handler: MessageHandler<Tx, M>): Promise<DeliveryOutcome>;
  /**
   * Group commit: the same guarantee for several messages of one consumer in **one**
   * transaction and one commit. A duplicate changes nothing but its own outcome; a refusal or a
   * failing handler rolls the batch back, and its messages are consumed one at a time, so each
   * still ends on its own. Resolves after the commit with one outcome per message, in order; if
   * the transaction or its commit fails, every message gets that failure (none is processed) and
   * the caller must settle none of them.
   */
  consumeBatch<M extends Envelope>(
    consumer: string,
    messages: readonly M[],
    handler: MessageHandler<Tx, M>,
  ): Promise<DeliveryOutcome[]>;
  readonly deadLetters: DeadLetters;
}

/** Thrown inside the transaction to roll it back when the handler refuses the message. */
class Refusal extends Error {
  constructor(readonly result: Extract<HandlerResult, { outcome: 'permanent_failure' | 'transient_failure' }>) {
    super(result.reason);
  }
}

/** Thrown inside a batch's transaction to roll it back and consume its messages one at a time. */
class OneAtATime extends Error {}

/** A message of a batch: where its outcome goes, its id as PostgreSQL writes a uuid (lower case), its body hash. */
interface Batched<M extends Envelope> {
  readonly message: M;
  readonly index: number;
  readonly id: string;
  readonly hash: string;
}

/** Thrown inside the transaction by the `rollback-after-handler` fault switch. */
class ForcedRollback extends Error {
  constructor() {
    super('rollback forced after the handler ran (fault switch rollback-after-handler)');
  }
}

export function createInbox<Tx extends SqlClient>(options: InboxOptions<Tx>): Inbox<Tx> {
  const { db, now = () => new Date(), faults = noFaults, transaction, onConflictingDuplicate } = options;
  // Duplicates come in runs — a replay, a batch published again after a relay crash — and are
  // rare otherwise. After a duplicate, a consumer reads before it inserts, until a delivery
  // turns out to be new: first deliveries in the steady state never pay for the read.
  const duplicatesArriving = new Set<string>();

  async function consume<M extends Envelope>(
    consumer: string,
    message: M,
    handler: MessageHandler<Tx, M>,
  ): Promise<DeliveryOutcome> {
    const hash = bodyHash(message.body);
    const mistake = INBOX_MISTAKES.find((name) => faults.fires(name, consumer));
    if (mistake) return wrongWay(mistake, consumer, message, handler);
    try {
      // While duplicates are arriving, a primary-key read answers each one without opening a
      // transaction or writing anything. It is only a shortcut: two deliveries at the same
      // moment can both read "absent", and then the insert below decides.
      if (duplicatesArriving.has(consumer)) {
        const stored = await storedBodyHash(consumer, message.messageId);
        if (stored !== undefined) return duplicateOf(consumer, message.messageId, stored, hash);
        duplicatesArriving.delete(consumer);
      }
      return await db.$transaction(async (tx) => {
        // Insert the record before the business change. The primary key, not a read, decides
        // between concurrent deliveries: a second insert waits for the first transaction and
        // fails once it commits, so the handler below never runs for a duplicate.
        await tx.$executeRaw`
          INSERT INTO processed_messages (consumer, message_id, body_hash, processed_at)
          VALUES (${consumer}, ${message.messageId}::uuid, ${hash}, ${now()})`;
        const result = await handler(message, tx);
        if (result.outcome === 'permanent_failure' || result.outcome === 'transient_failure') throw new Refusal(result);
        if (faults.fires('rollback-after-handler', consumer)) throw new ForcedRollback();
        return result;
      }, transaction);
    } catch (error) {
      if (isProcessedMessageConflict(error)) {
        duplicatesArriving.add(consumer);
        return duplicateOf(consumer, message.messageId, await storedBodyHash(consumer, message.messageId), hash);
      }
      if (error instanceof Refusal) {
        const { outcome, code, reason } = error.result;
        return { outcome, code, reason: boundReason(reason) };
      }
      if (error instanceof ForcedRollback) {
        return { outcome: 'transient_failure', code: 'forced_rollback', reason: error.message };
      }
      return { ...classifyFailure(error), error };
    }
  }

  function wrongWay<M extends Envelope>(
    mistake: InboxMistake,
    consumer: string,
    message: M,
    handler: MessageHandler<Tx, M>,
  ): Promise<DeliveryOutcome> {
    const record = (tx: SqlClient) => tx.$executeRaw`
      INSERT INTO processed_messages (consumer, message_id, body_hash, processed_at)
      VALUES (${consumer}, ${message.messageId}::uuid, ${bodyHash(message.body)}, ${now()}) ON CONFLICT DO NOTHING`;
    return consumeTheWrongWay(mistake, { db, faults, transaction, consumer, message, handler, record });
  }

  async function consumeBatch<M extends Envelope>(
    consumer: string,
    messages: readonly M[],
    handler: MessageHandler<Tx, M>,
  ): Promise<DeliveryOutcome[]> {
    const outcomes: Promise<DeliveryOutcome>[] = [];
    let batch: Batched<M>[] = [];
    for (const [index, message] of messages.entries()) {
      const mistake = INBOX_MISTAKES.find((name) => faults.fires(name, consumer));
      if (mistake) outcomes[index] = wrongWay(mistake, consumer, message, handler);
      else batch.push({ message, index, id: message.messageId.toLowerCase(), hash: bodyHash(message.body) });
    }
    // While duplicates are arriving, one read answers those of the batch already processed, as
    // in `consume`; the insert below still decides for the rest.
    // (A read that fails is only a shortcut missed: the transaction below decides and classifies.)
    if (duplicatesArriving.has(consumer) && batch.length > 0) {
      const stored = await storedBodyHashes(db, consumer, batch).catch(() => new Map<string, string>());
      for (const entry of batch.filter(({ id }) => stored.has(id))) {
        outcomes[entry.index] = Promise.resolve(
          duplicateOf(consumer, entry.message.messageId, stored.get(entry.id), entry.hash),
        );
      }
      batch = batch.filter(({ id }) => !stored.has(id));
      if (batch.length > 0) duplicatesArriving.delete(consumer);
    }
    // Records in message-id order: two instances batching the same messages take the primary
    // key's locks in the same order, so they wait for each other instead of deadlocking.
    batch.sort((a, b) => (a.id < b.id ? -1 : 1));
    const committed = batch.length === 0 ? Promise.resolve([]) : commitTogether(consumer, batch, handler);
    for (const [position, { index }] of batch.entries()) {
      outcomes[index] = committed.then((results) => results[position]!);
    }
    return Promise.all(outcomes);
  }

  /**
   * One transaction for the batch: every processed record in one statement, then the handler of
   * each new message. Any refusal or error rolls the whole batch back and it is consumed again
   * one message at a time, so that each still ends on its own (measured: faster than a savepoint
   * per message, docs/performance.md). Outcomes only once the transaction committed.
   */
  async function commitTogether<M extends Envelope>(
    consumer: string,
    batch: readonly Batched<M>[],
    handler: MessageHandler<Tx, M>,
  ): Promise<DeliveryOutcome[]> {
    const conflicts: ConflictingDuplicate[] = [];
    const records = JSON.stringify(batch.map(({ id, hash }) => ({ id, hash })));
    try {
      const outcomes = await db.$transaction(async (tx) => {
        // The key decides, as in `consume`, without an error for a duplicate: a record that meets
        // a committed one (or an earlier copy in this batch) inserts nothing, and one that meets
        // an uncommitted one waits for that transaction to end.
        const inserted = await tx.$queryRaw<{ id: string }[]>`
          INSERT INTO processed_messages (consumer, message_id, body_hash, processed_at)
          SELECT ${consumer}, r.id, r.hash, ${now()} FROM jsonb_to_recordset(${records}::jsonb) AS r(id uuid, hash text)
          ON CONFLICT (consumer, message_id) DO NOTHING RETURNING message_id::text AS id`;
        const fresh = new Set(inserted.map((row) => row.id));
        let stored = new Map<string, string>();
        if (fresh.size < batch.length) {
          duplicatesArriving.add(consumer);
          stored = await storedBodyHashes(tx, consumer, batch);
        }
        const results: DeliveryOutcome[] = [];
        for (const { message, id, hash } of batch) {
          if (!fresh.delete(id)) {
            results.push(duplicateOf(consumer, message.messageId, stored.get(id), hash, conflicts));
            continue;
          }
          const result = await handler(message, tx).catch(() => undefined);
          if (result?.outcome !== 'processed' && result?.outcome !== 'stale') throw new OneAtATime();
          if (faults.fires('rollback-after-handler', consumer)) throw new OneAtATime();
          results.push(result);
        }
        return results;
      }, transaction);
      for (const conflict of conflicts) onConflictingDuplicate?.(conflict);
      return outcomes;
    } catch (error) {
      if (!(error instanceof OneAtATime)) {
        // The transaction or its commit failed: nothing of the batch is processed.
        const failure = { ...classifyFailure(error), error };
        return batch.map(() => failure);
      }
      const outcomes: DeliveryOutcome[] = [];
      for (const { message } of batch) outcomes.push(await consume(consumer, message, handler));
      return outcomes;
    }
  }

  async function storedBodyHashes(
    client: SqlClient,
    consumer: string,
    batch: readonly Batched<Envelope>[],
  ): Promise<Map<string, string>> {
    const ids = JSON.stringify(batch.map(({ id }) => id));
    const rows = await client.$queryRaw<{ id: string; body_hash: string }[]>`
      SELECT message_id::text AS id, body_hash FROM processed_messages
      WHERE consumer = ${consumer} AND message_id IN (SELECT jsonb_array_elements_text(${ids}::jsonb)::uuid)`;
    return new Map(rows.map((row) => [row.id, row.body_hash]));
  }

  async function storedBodyHash(consumer: string, messageId: string): Promise<string | undefined> {
    const rows = await db.$queryRaw<{ body_hash: string }[]>`
      SELECT body_hash FROM processed_messages WHERE consumer = ${consumer} AND message_id = ${messageId}::uuid`;
    return rows[0]?.body_hash;
  }

  /** A duplicate changes nothing; only a different body for the same id is worth a look. */
  function duplicateOf(
    consumer: string,
    messageId: string,
    storedBodyHash: string | undefined,
    receivedBodyHash: string,
    // A batch reports conflicts once it committed; `consume` at once.
    reported: { push(conflict: ConflictingDuplicate): void } = {
      push: (conflict) => onConflictingDuplicate?.(conflict),
    },
  ): DeliveryOutcome {
    if (storedBodyHash === undefined || storedBodyHash === receivedBodyHash) return { outcome: 'duplicate' };
    reported.push({ consumer, messageId, storedBodyHash, receivedBodyHash });
    return {
      outcome: 'conflicting_duplicate',
      reason: `message ${messageId} was already processed by ${consumer} with a different body (stored body hash ${storedBodyHash.slice(0, 12)}…, received ${receivedBodyHash.slice(0, 12)}…): the producer reused a message id`,
    };
  }

  return { consume, consumeBatch, deadLetters: createDeadLetters(db, now) };
}
