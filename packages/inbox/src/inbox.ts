import type { Envelope } from '@idem/contracts';
import { boundReason } from '@idem/contracts';
import { noFaults, type Faults } from '@idem/faults';
import { bodyHash } from './body-hash.js';
import { classifyFailure, isProcessedMessageConflict } from './database-errors.js';
import { createDeadLetters, type DeadLetters } from './dead-letters.js';
import { consumeTheWrongWay, INBOX_MISTAKES } from './mistakes.js';
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
  readonly deadLetters: DeadLetters;
}

/** Thrown inside the transaction to roll it back when the handler refuses the message. */
class Refusal extends Error {
  constructor(readonly result: Extract<HandlerResult, { outcome: 'permanent_failure' | 'transient_failure' }>) {
    super(result.reason);
  }
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
    if (mistake) {
      const record = (tx: SqlClient) => tx.$executeRaw`
        INSERT INTO processed_messages (consumer, message_id, body_hash, processed_at)
        VALUES (${consumer}, ${message.messageId}::uuid, ${hash}, ${now()}) ON CONFLICT DO NOTHING`;
      return consumeTheWrongWay(mistake, { db, faults, transaction, consumer, message, handler, record });
    }
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
  ): DeliveryOutcome {
    if (storedBodyHash === undefined || storedBodyHash === receivedBodyHash) return { outcome: 'duplicate' };
    onConflictingDuplicate?.({ consumer, messageId, storedBodyHash, receivedBodyHash });
    return {
      outcome: 'conflicting_duplicate',
      reason: `message ${messageId} was already processed by ${consumer} with a different body (stored body hash ${storedBodyHash.slice(0, 12)}…, received ${receivedBodyHash.slice(0, 12)}…): the producer reused a message id`,
    };
  }

  return { consume, deadLetters: createDeadLetters(db, now) };
}
