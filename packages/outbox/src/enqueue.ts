import {
  createEnvelope,
  type Catalogue,
  type CatalogueSpec,
  type Envelope,
  type EventDraft,
  type EventType,
} from '@idem/contracts';
import type { SqlClient } from '@idem/database';
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
  const sweepAt = handoffOf(tx)?.take(tx, envelope, now);
  // One statement: the insert and, unless the writer hands it over, the wake-up for a listening relay.
  await tx.$executeRaw`
    WITH inserted AS (
      INSERT INTO outbox_messages (message_id, type, envelope, created_at, next_attempt_at)
      VALUES (${envelope.messageId}::uuid, ${envelope.type}, ${JSON.stringify(envelope)}::jsonb, ${now}, ${sweepAt ?? now})
      RETURNING 1
    )
    SELECT pg_notify(${OUTBOX_CHANNEL}, '') FROM inserted WHERE ${sweepAt === undefined}`;
  return envelope;
}
