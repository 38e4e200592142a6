/**
 * One statement for a delivery whose handler's common case is one conditional write — an order
 * moved on, a reservation committed: the inbox's record and that write travel together, with no
 * transaction around them (no BEGIN, no COMMIT: one round trip where `consume` makes four).
 *
 * The handler gives its write as the WITH list of a statement and names the CTE that returns a row
 * when it wrote (`OneStatementEffect`); the inbox adds its record, inserted only when that CTE has a
 * row, and runs the statement alone. It is `consume`'s algorithm in one atomic statement:
 * - a first delivery whose write applies: the write and the record commit together (`processed`);
 * - a duplicate: its record's insert fails on the primary key — waiting, like `consume`'s, for a
 *   concurrent delivery of the same message to commit — and the failure takes the write with it;
 * - a write that does not apply (the state moved on, or this is not the handler's common case):
 *   nothing is written, and `consume` decides the delivery, its plain way, as it always would.
 * So every delivery ends as `consume` would end it ("gives the outcomes and rows of consume",
 * one-statement.int.spec.ts), and the common one costs one statement. With no transaction there
 * is no transaction timeout either: the statement waits for a row lock as long as its holder,
 * whose own transaction has one. What a transaction would do after its commit (an event's
 * handoff, a work item taken by its own process) the effect's `afterCommit` does once the
 * statement has committed with its record. A handler may read before it writes (the order a
 * receipt is about) only what cannot change under it: the read is not in the statement.
 */
import type { AnyEnvelope } from '@idem/contracts';
import { identifier, query, sql, type Sql, type SqlClient } from '@idem/database';
import { bodyHash } from './body-hash.js';
import { ForcedRollback } from './database-errors.js';
import type { Inbox } from './inbox.js';
import type { DeliveryOutcome, MessageHandler } from './outcomes.js';

/** A handler's common case as one statement's WITH list, and the CTE that has a row when it wrote. */
export interface OneStatementEffect {
  /** `name AS (UPDATE … RETURNING …), …`: data-modifying CTEs, as PostgreSQL allows them (at the top level). */
  readonly with: Sql;
  /** The CTE of `with` that returns a row when the write applied, and none when it did not. */
  readonly wrote: string;
  /** Run once the statement has committed having written (an event's handoff: @idem/outbox `enqueueInOneStatement`). */
  readonly afterCommit?: () => void;
}

/**
 * A handler (the plain way, in `consume`'s transaction) with its common case as one statement, to
 * run on `db` (the inbox's client: where an event or a work item written by it is handed over).
 */
export type OneStatementHandler<Tx, M extends AnyEnvelope = AnyEnvelope> = MessageHandler<Tx, M> & {
  /**
   * The statement's write; undefined when the message is not the handler's common case (the
   * plain way then decides it). It may read first, outside any transaction: only what cannot
   * change under it (a row written once, never updated), as the statement does not re-check it.
   */
  readonly inOneStatement: (
    message: M,
    db: SqlClient,
  ) => OneStatementEffect | undefined | Promise<OneStatementEffect | undefined>;
};

/** Whether `handler` has a one-statement common case. */
export const hasOneStatement = <Tx, M extends AnyEnvelope>(
  handler: MessageHandler<Tx, M>,
): handler is OneStatementHandler<Tx, M> => 'inOneStatement' in handler;

export async function consumeInOneStatement<Tx extends SqlClient, M extends AnyEnvelope>(
  inbox: Inbox<Tx>,
  consumer: string,
  message: M,
  handler: OneStatementHandler<Tx, M>,
): Promise<DeliveryOutcome> {
  const hash = bodyHash(message.body);
  const known = await inbox.knownDuplicate(consumer, message, hash);
  if (known) return known;
  let effect: OneStatementEffect | undefined;
  let recorded = false;
  try {
    effect = await handler.inOneStatement(message, inbox.db);
    if (effect) recorded = await writeAndRecord(inbox, consumer, message, hash, effect);
  } catch (error) {
    return inbox.outcomeOfError(consumer, message, hash, error);
  }
  // Not applied: `consume` decides it. Its duplicate shortcut reads nothing again unless another
  // duplicate arrived meanwhile: the one above found this delivery new, which ends a run.
  if (!effect || !recorded) return inbox.consume(consumer, message, handler);
  effect.afterCommit?.();
  return { outcome: 'processed' };
}

/**
 * Runs the handler's write with the inbox's record, inserted only when the write applied; true
 * when it was. In `consume`'s `rollback-after-handler` window, the statement runs in a
 * transaction that is then rolled back.
 */
async function writeAndRecord<Tx extends SqlClient>(
  inbox: Inbox<Tx>,
  consumer: string,
  message: AnyEnvelope,
  hash: string,
  effect: OneStatementEffect,
): Promise<boolean> {
  const statement = sql`
    WITH ${effect.with},
    inbox_record AS (
      INSERT INTO processed_messages (consumer, message_id, body_hash, processed_at)
      SELECT ${consumer}, ${message.messageId}::uuid, ${hash}, ${inbox.now()}
       WHERE EXISTS (SELECT 1 FROM ${identifier(effect.wrote)})
      RETURNING 1
    )
    SELECT count(*)::int AS recorded FROM inbox_record`;
  if (inbox.faults.fires('rollback-after-handler', consumer))
    // Throws: the statement's write and record are rolled back, as `consume`'s would be.
    await inbox.db.$transaction(async (tx) => {
      await query(tx, statement);
      throw new ForcedRollback();
    }, inbox.transaction);
  const [{ recorded } = { recorded: 0 }] = await query<{ recorded: number }>(inbox.db, statement);
  return recorded === 1;
}
