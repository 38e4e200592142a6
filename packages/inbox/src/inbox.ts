import type { AnyEnvelope } from '@idem/contracts';
import { boundReason } from '@idem/contracts';
import type { SqlClient, TransactionalClient, TransactionOptions } from '@idem/database';
import { noFaults, type Faults } from '@idem/faults';
import { bodyHash } from './body-hash.js';
import { classifyFailure, isProcessedMessageConflict } from './database-errors.js';
import { createDeadLetters, type DeadLetters } from './dead-letters.js';
import { duplicateOf, DuplicateShortcut, storedBodyHashes, type ConflictingDuplicate } from './duplicates.js';
import { consumeBatch, type GroupCommit } from './group-commit.js';
import type { DeliveryOutcome, HandlerResult, MessageHandler } from './outcomes.js';

/**
 * The idempotent consumer, as the article's "How It Works" gives it: in one transaction, record
 * `(consumer, message_id)` first — its primary key decides whether this delivery is the first —
 * then apply the business change, and commit both; a duplicate changes nothing. `consume` below
 * is that algorithm and nothing else. Beside it, each in its own module: what makes it cheaper
 * without changing an outcome (duplicates.ts: the duplicate shortcut; group-commit.ts: several
 * messages per commit). The article's common mistakes are not here: the lessons make them, behind
 * this same interface (`infra/lessons/src/wrong-ways.ts`).
 */

export type { ConflictingDuplicate, MessageHandler };

/** The service's database, clock and fault switches. */
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

/** Records processed messages and applies each message's effect once, in the same transaction. */
export interface Inbox<Tx extends SqlClient> {
  /**
   * The idempotent consumer (the article's steps 3–7): in one transaction, record
   * `(consumer, message_id)` and apply the handler's business change, then commit both.
   * Returns the delivery's outcome; the caller settles the broker delivery only after this
   * resolves, i.e. after the commit.
   */
  consume<M extends AnyEnvelope>(
    consumer: string,
    message: M,
    handler: MessageHandler<Tx, M>,
  ): Promise<DeliveryOutcome>;
  /**
   * Group commit: the same guarantee for several messages of one consumer in **one**
   * transaction and one commit. A duplicate changes nothing but its own outcome; a refusal or a
   * failing handler rolls the batch back, and its messages are consumed one at a time, so each
   * still ends on its own. Resolves after the commit with one outcome per message, in order; if
   * the transaction or its commit fails, every message gets that failure (none is processed) and
   * the caller must settle none of them.
   */
  consumeBatch<M extends AnyEnvelope>(
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

/** Thrown inside the transaction by the `rollback-after-handler` fault switch. */
class ForcedRollback extends Error {
  constructor() {
    super('rollback forced after the handler ran (fault switch rollback-after-handler)');
  }
}

/** The inbox of one service: its processed-message records, in the database its business rows live in. */
export function createInbox<Tx extends SqlClient>(options: InboxOptions<Tx>): Inbox<Tx> {
  const { db, now = () => new Date(), faults = noFaults, transaction, onConflictingDuplicate } = options;
  const report = (conflict: ConflictingDuplicate) => onConflictingDuplicate?.(conflict);
  const shortcut = new DuplicateShortcut(db);

  /** The article's steps 3–7 for one delivery; the caller settles it only after this resolves. */
  async function consume<M extends AnyEnvelope>(
    consumer: string,
    message: M,
    handler: MessageHandler<Tx, M>,
  ): Promise<DeliveryOutcome> {
    const hash = bodyHash(message.body);
    const id = message.messageId.toLowerCase();
    const known = (await shortcut.processedAmong(consumer, [id])).get(id);
    if (known !== undefined) return duplicateOf(consumer, message.messageId, known, hash, report);
    try {
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
        shortcut.seen(consumer);
        const stored = (await storedBodyHashes(db, consumer, [id])).get(id);
        return duplicateOf(consumer, message.messageId, stored, hash, report);
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

  const inbox: GroupCommit<Tx> = { db, now, faults, transaction, shortcut, report, consume };
  return {
    consume,
    consumeBatch: (consumer, messages, handler) => consumeBatch(inbox, consumer, messages, handler),
    deadLetters: createDeadLetters(db, now),
  };
}
