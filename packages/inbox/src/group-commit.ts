import type { AnyEnvelope } from '@idem/contracts';
import type { SqlClient } from '@idem/database';
import { bodyHash } from './body-hash.js';
import { classifyFailure } from './database-errors.js';
import { duplicateOf, storedBodyHashes, type ConflictingDuplicate } from './duplicates.js';
import type { Inbox } from './inbox.js';
import { locksFirst, type DeliveryOutcome, type MessageHandler } from './outcomes.js';

/**
 * Group commit — an optimisation of the inbox's one transaction per message, not a different
 * algorithm: the same steps for several messages of one consumer, in one transaction and one
 * commit (fewer commits, each of which waits for the disk). A duplicate changes nothing but its
 * own outcome; a refusal or a failing handler rolls the batch back and its messages are consumed
 * one at a time (`Inbox.consume`), so each still ends on its own. The tests that show it changes no
 * outcome: "group commit (inbox.consumeBatch)" in clients.int.spec.ts, on both database clients.
 */
/** A message of a batch: where its outcome goes, its id as PostgreSQL writes a uuid (lower case), its body hash. */
interface Batched<M extends AnyEnvelope> {
  readonly message: M;
  readonly index: number;
  readonly id: string;
  readonly hash: string;
}

/** Thrown inside a batch's transaction to roll it back and consume its messages one at a time. */
class OneAtATime extends Error {}

/** One outcome per message, in order, once the batch's transaction committed (see `Inbox.consumeBatch`). */
export async function consumeTogether<Tx extends SqlClient, M extends AnyEnvelope>(
  inbox: Inbox<Tx>,
  consumer: string,
  messages: readonly M[],
  handler: MessageHandler<Tx, M>,
): Promise<DeliveryOutcome[]> {
  const outcomes: Promise<DeliveryOutcome>[] = [];
  let batch: Batched<M>[] = messages.map((message, index) => ({
    message,
    index,
    id: message.messageId.toLowerCase(),
    hash: bodyHash(message.body),
  }));
  // One read answers those already processed while duplicates are arriving; the insert decides for the rest.
  const stored = await inbox.shortcut.processedAmong(
    consumer,
    batch.map(({ id }) => id),
  );
  for (const entry of batch.filter(({ id }) => stored.has(id))) {
    outcomes[entry.index] = Promise.resolve(
      duplicateOf(consumer, entry.message.messageId, stored.get(entry.id), entry.hash, inbox.report),
    );
  }
  batch = batch.filter(({ id }) => !stored.has(id));
  // Records in message-id order: two instances batching the same messages take the primary
  // key's locks in the same order, so they wait for each other instead of deadlocking.
  batch.sort((a, b) => (a.id < b.id ? -1 : 1));
  const committed = batch.length === 0 ? Promise.resolve([]) : commitTogether(inbox, consumer, batch, handler);
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
async function commitTogether<Tx extends SqlClient, M extends AnyEnvelope>(
  inbox: Inbox<Tx>,
  consumer: string,
  batch: readonly Batched<M>[],
  handler: MessageHandler<Tx, M>,
): Promise<DeliveryOutcome[]> {
  const conflicts: ConflictingDuplicate[] = [];
  const records = JSON.stringify(batch.map(({ id, hash }) => ({ id, hash })));
  try {
    const outcomes = await inbox.db.$transaction(async (tx) => {
      // The key decides, as in `consume`, without an error for a duplicate: a record that meets
      // a committed one (or an earlier copy in this batch) inserts nothing, and one that meets
      // an uncommitted one waits for that transaction to end.
      const inserted = await tx.$queryRaw<{ id: string }[]>`
        INSERT INTO processed_messages (consumer, message_id, body_hash, processed_at)
        SELECT ${consumer}, r.id, r.hash, ${inbox.now()} FROM jsonb_to_recordset(${records}::jsonb) AS r(id uuid, hash text)
        ON CONFLICT (consumer, message_id) DO NOTHING RETURNING message_id::text AS id`;
      const fresh = new Set(inserted.map((row) => row.id));
      let stored = new Map<string, string>();
      if (fresh.size < batch.length) {
        inbox.shortcut.seen(consumer);
        stored = await storedBodyHashes(
          tx,
          consumer,
          batch.map(({ id }) => id),
        );
      }
      if (locksFirst(handler))
        await handler.lockFirst(
          batch.filter(({ id }) => fresh.has(id)).map(({ message }) => message),
          tx,
        );
      const results: DeliveryOutcome[] = [];
      for (const { message, id, hash } of batch) {
        if (!fresh.delete(id)) {
          // Reported once the batch committed.
          results.push(duplicateOf(consumer, message.messageId, stored.get(id), hash, (c) => conflicts.push(c)));
          continue;
        }
        const result = await handler(message, tx).catch(() => undefined);
        if (result?.outcome !== 'processed' && result?.outcome !== 'stale') throw new OneAtATime();
        if (inbox.faults.fires('rollback-after-handler', consumer)) throw new OneAtATime();
        results.push(result);
      }
      return results;
    }, inbox.transaction);
    conflicts.forEach(inbox.report);
    return outcomes;
  } catch (error) {
    if (!(error instanceof OneAtATime)) {
      // The transaction or its commit failed: nothing of the batch is processed.
      const failure = { ...classifyFailure(error), error };
      return batch.map(() => failure);
    }
    const outcomes: DeliveryOutcome[] = [];
    for (const { message } of batch) outcomes.push(await inbox.consume(consumer, message, handler));
    return outcomes;
  }
}
