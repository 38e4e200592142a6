import type { AnyEnvelope } from '@idem/contracts';
import { boundReason } from '@idem/contracts';
import type { SqlClient, TransactionalClient, TransactionOptions } from '@idem/database';
import { noFaults, type Faults } from '@idem/faults';
import { bodyHash } from './body-hash.js';
import { classifyFailure, ForcedRollback, isProcessedMessageConflict } from './database-errors.js';
import { createDeadLetters, type DeadLetters } from './dead-letters.js';
import { duplicateOf, DuplicateShortcut, storedBodyHashes, type ConflictingDuplicate } from './duplicates.js';
import { consumeTogether } from './group-commit.js';
import { consumeInOneStatement, type OneStatementHandler } from './one-statement.js';
import type { DeliveryOutcome, HandlerResult, MessageHandler } from './outcomes.js';

/**
 * The idempotent consumer, as the article's "How It Works" gives it: in one transaction, record
 * `(consumer, message_id)` first — its primary key decides whether this delivery is the first —
 * then apply the business change, and commit both; a duplicate changes nothing. `consume` below
 * is that algorithm, after one read that decides nothing: while a run of duplicates arrives it
 * answers one whose record is committed (duplicates.ts, the duplicate shortcut). Beside it, each
 * in its own module: what makes it cheaper without changing an outcome (that shortcut;
 * group-commit.ts: several messages per commit; one-statement.ts: the record and a one-statement
 * write as one round trip). The article's common mistakes are not here: the lessons make them,
 * behind this same interface (`infra/lessons/src/wrong-ways.ts`).
 */

export type { ConflictingDuplicate, MessageHandler, OneStatementHandler };

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

/** Thrown inside the transaction to roll it back when the handler refuses the message. */
class Refusal extends Error {
  constructor(readonly result: Extract<HandlerResult, { outcome: 'permanent_failure' | 'transient_failure' }>) {
    super(result.reason);
  }
}

/**
 * The inbox of one service: its processed-message records, in the database its business rows
 * live in. Records processed messages and applies each message's effect once, in the same
 * transaction.
 */
export class Inbox<Tx extends SqlClient> {
  /** @internal */ readonly db: TransactionalClient<Tx>;
  /** @internal */ readonly now: () => Date;
  /** @internal */ readonly faults: Faults;
  /** @internal */ readonly transaction: TransactionOptions | undefined;
  /** @internal */ readonly shortcut: DuplicateShortcut;
  /** The service's dead letters: deliveries that can never succeed, kept for an operator. */
  readonly deadLetters: DeadLetters;
  readonly #onConflictingDuplicate: InboxOptions<Tx>['onConflictingDuplicate'];

  constructor(options: InboxOptions<Tx>) {
    this.db = options.db;
    this.now = options.now ?? (() => new Date());
    this.faults = options.faults ?? noFaults;
    this.transaction = options.transaction;
    this.#onConflictingDuplicate = options.onConflictingDuplicate;
    this.shortcut = new DuplicateShortcut(options.db);
    this.deadLetters = createDeadLetters(options.db, this.now);
  }

  /**
   * The idempotent consumer (the article's steps 3–7): in one transaction, record
   * `(consumer, message_id)` and apply the handler's business change, then commit both.
   * Returns the delivery's outcome; the caller settles the broker delivery only after this
   * resolves, i.e. after the commit.
   */
  async consume<M extends AnyEnvelope>(
    consumer: string,
    message: M,
    handler: MessageHandler<Tx, M>,
  ): Promise<DeliveryOutcome> {
    const hash = bodyHash(message.body);
    // Not read-then-insert: a read that finds the record can only be right (it was committed), and
    // one that finds nothing lets nothing through — the INSERT below decides, as for every delivery.
    const known = await this.knownDuplicate(consumer, message, hash);
    if (known) return known;
    try {
      return await this.db.$transaction(async (tx) => {
        // Insert the record before the business change. The primary key, not a read, decides
        // between concurrent deliveries: a second insert waits for the first transaction and
        // fails once it commits, so the handler below never runs for a duplicate.
        await tx.$executeRaw`
          INSERT INTO processed_messages (consumer, message_id, body_hash, processed_at)
          VALUES (${consumer}, ${message.messageId}::uuid, ${hash}, ${this.now()})`;
        const result = await handler(message, tx);
        if (result.outcome === 'permanent_failure' || result.outcome === 'transient_failure') throw new Refusal(result);
        if (this.faults.fires('rollback-after-handler', consumer)) throw new ForcedRollback();
        return result;
      }, this.transaction);
    } catch (error) {
      if (error instanceof Refusal) {
        const { outcome, code, reason } = error.result;
        return { outcome, code, reason: boundReason(reason) };
      }
      return this.outcomeOfError(consumer, message, hash, error);
    }
  }

  /**
   * @internal While a run of duplicates arrives (duplicates.ts), the outcome of one found by a
   * read; otherwise undefined, and the record's insert decides.
   */
  async knownDuplicate(consumer: string, message: AnyEnvelope, hash: string): Promise<DeliveryOutcome | undefined> {
    const id = message.messageId.toLowerCase();
    const known = (await this.shortcut.processedAmong(consumer, [id])).get(id);
    return known === undefined ? undefined : duplicateOf(consumer, message.messageId, known, hash, this.report);
  }

  /**
   * The same guarantee as {@link Inbox.consume} in one statement, for a handler whose common
   * case is one conditional write (one-statement.ts): the record and the write together, no
   * transaction around them; `consume` itself when the write does not apply.
   */
  consumeInOneStatement<M extends AnyEnvelope>(
    consumer: string,
    message: M,
    handler: OneStatementHandler<Tx, M>,
  ): Promise<DeliveryOutcome> {
    return consumeInOneStatement(this, consumer, message, handler);
  }

  /**
   * @internal How a delivery ends whose transaction failed: a duplicate when its record's key
   * was taken (the only way a second delivery is told apart), a forced rollback when a fault
   * switch made it, otherwise the database's error, classified.
   */
  async outcomeOfError(consumer: string, message: AnyEnvelope, hash: string, error: unknown): Promise<DeliveryOutcome> {
    if (isProcessedMessageConflict(error)) {
      this.shortcut.seen(consumer);
      const id = message.messageId.toLowerCase();
      const stored = (await storedBodyHashes(this.db, consumer, [id])).get(id);
      return duplicateOf(consumer, message.messageId, stored, hash, this.report);
    }
    if (error instanceof ForcedRollback) {
      return { outcome: 'transient_failure', code: 'forced_rollback', reason: error.message };
    }
    return { ...classifyFailure(error), error };
  }

  /**
   * Group commit (group-commit.ts): the same guarantee for several messages of one consumer in
   * **one** transaction and one commit. A duplicate changes nothing but its own outcome; a refusal
   * or a failing handler rolls the batch back, and its messages are consumed one at a time, so
   * each still ends on its own. Resolves after the commit with one outcome per message, in order;
   * if the transaction or its commit fails, every message gets that failure (none is processed)
   * and the caller must settle none of them.
   */
  consumeBatch<M extends AnyEnvelope>(
    consumer: string,
    messages: readonly M[],
    handler: MessageHandler<Tx, M>,
  ): Promise<DeliveryOutcome[]> {
    return consumeTogether(this, consumer, messages, handler);
  }

  /** @internal Tells `onConflictingDuplicate` of a producer that reused an id. */
  readonly report = (conflict: ConflictingDuplicate): void => this.#onConflictingDuplicate?.(conflict);
}

/** The inbox of one service (`new Inbox(options)`). */
export function createInbox<Tx extends SqlClient>(options: InboxOptions<Tx>): Inbox<Tx> {
  return new Inbox(options);
}
