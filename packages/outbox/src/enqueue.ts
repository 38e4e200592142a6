import {
  createEnvelope,
  type AnyEnvelope,
  type Catalogue,
  type CatalogueSpec,
  type Envelope,
  type EventDraft,
  type EventType,
} from '@idem/contracts';
import { execute, sql, type Sql, type SqlClient } from '@idem/database';
import { handoffOf } from './handoff.js';

/** The channel the relay LISTENs on; a notification is delivered when the writing transaction commits. */
export const OUTBOX_CHANNEL = 'idem_outbox';

/**
 * Writes an event of `catalogue` to the outbox in the caller's transaction, so the event exists
 * if and only if the business change it describes commits. The message id is assigned here,
 * once: every publication and redelivery of this row carries the same id. In a transaction of a
 * client whose handoff is started (handoff.ts), the event is also handed to the broker once it
 * commits, and the row is left to the relay only if that handoff does not mark it in time.
 */
export async function enqueue<S extends CatalogueSpec, T extends EventType<S>>(
  tx: SqlClient,
  catalogue: Catalogue<S>,
  draft: EventDraft<S, T>,
  now: Date,
): Promise<Envelope<S, T>> {
  const envelope = createEnvelope(catalogue, draft, now);
  await execute(tx, outboxInsert(envelope, now, handoffOf(tx)?.take(tx, envelope, now), sql`TRUE`));
  return envelope;
}

/** An event written as a piece of one statement of the caller's own: see {@link enqueueInOneStatement}. */
export interface EventInOneStatement<E> {
  readonly envelope: E;
  /** The outbox's INSERT, for the statement's WITH list: `event AS (${insert})`. */
  readonly insert: Sql;
  /** To call once the statement has committed with the event in it: hands the event to the broker. */
  readonly afterCommit: () => void;
}

/**
 * `enqueue` for a statement that runs alone, outside a transaction — a write that is one
 * statement, with its event (the inbox's one-statement route, @idem/inbox one-statement.ts): the
 * event's row is inserted by the same statement, only when `onlyIf` holds there (the write
 * applied), so it exists if and only if the change does, as in a transaction. The statement is
 * its own commit, so the caller calls `afterCommit` when it returns having written the event;
 * without that call (or on a client with no started handoff) the relay publishes the row, later.
 */
export function enqueueInOneStatement<S extends CatalogueSpec, T extends EventType<S>>(
  db: SqlClient,
  catalogue: Catalogue<S>,
  draft: EventDraft<S, T>,
  now: Date,
  onlyIf: Sql,
): EventInOneStatement<Envelope<S, T>> {
  const envelope = createEnvelope(catalogue, draft, now);
  const taken = handoffOf(db)?.takeAlone(envelope, now);
  return {
    envelope,
    insert: outboxInsert(envelope, now, taken?.sweepAt, onlyIf),
    afterCommit: taken?.handOver ?? (() => {}),
  };
}

/**
 * The outbox row of `envelope`, inserted when `onlyIf` holds: due for the relay at once (and
 * waking a listening relay) unless a handoff takes it, which leaves it to the relay until `sweepAt`.
 */
function outboxInsert(envelope: AnyEnvelope, now: Date, sweepAt: Date | undefined, onlyIf: Sql) {
  return sql`
    INSERT INTO outbox_messages (message_id, type, envelope, created_at, next_attempt_at)
    SELECT ${envelope.messageId}::uuid, ${envelope.type}::text, ${JSON.stringify(envelope)}::jsonb, ${now}::timestamptz,
           ${sweepAt ?? now}::timestamptz
     WHERE ${onlyIf}
    RETURNING CASE WHEN ${sweepAt === undefined}::boolean THEN pg_notify(${OUTBOX_CHANNEL}, '') END`;
}
