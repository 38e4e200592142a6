import type { AnyEnvelope } from '@idem/contracts';

/**
 * Every delivery ends as exactly one outcome. `processed`, `duplicate`, `stale` and
 * `conflicting_duplicate` are settled (the broker delivery completes, after the commit);
 * `transient_failure` is redelivered with backoff; `permanent_failure` is dead-lettered and
 * never recorded as processed.
 */
export type DeliveryOutcome =
  | { readonly outcome: 'processed' }
  | { readonly outcome: 'duplicate' }
  /** The message id was processed before with a different body: a producer bug, reported loudly. */
  | { readonly outcome: 'conflicting_duplicate'; readonly reason: string }
  | { readonly outcome: 'stale'; readonly reason: string }
  | { readonly outcome: 'transient_failure'; readonly code: string; readonly reason: string; readonly error?: unknown }
  | { readonly outcome: 'permanent_failure'; readonly code: string; readonly reason: string; readonly error?: unknown };

/** The name of a {@link DeliveryOutcome}: the label of the outcome metric. */
export type OutcomeName = DeliveryOutcome['outcome'];

/** Whether the broker delivery should be completed (true) or retried / dead-lettered. */
export function isSettled(
  outcome: DeliveryOutcome,
): outcome is Exclude<DeliveryOutcome, { outcome: 'transient_failure' | 'permanent_failure' }> {
  return outcome.outcome !== 'transient_failure' && outcome.outcome !== 'permanent_failure';
}

/** What a handler decides about a message it was given (inside the inbox transaction). */
export type HandlerResult =
  | { readonly outcome: 'processed' }
  | { readonly outcome: 'stale'; readonly reason: string }
  | { readonly outcome: 'transient_failure'; readonly code: string; readonly reason: string }
  | { readonly outcome: 'permanent_failure'; readonly code: string; readonly reason: string };

/** The business change was applied. */
export const processed = { outcome: 'processed' } as const satisfies HandlerResult;

/** The message is older than the state already applied; the record commits, nothing else changes. */
export function stale(reason: string): HandlerResult {
  return { outcome: 'stale', reason };
}

/** The message cannot be applied yet (e.g. what it refers to has not arrived); the transaction rolls back and it is redelivered. */
export function transientFailure(code: string, reason: string): HandlerResult {
  return { outcome: 'transient_failure', code, reason };
}

/** The message can never be applied (e.g. a business rule it breaks); the transaction rolls back. */
export function permanentFailure(code: string, reason: string): HandlerResult {
  return { outcome: 'permanent_failure', code, reason };
}

/** Business code for one consumer: runs inside the inbox transaction, with that transaction. */
export type MessageHandler<Tx, M extends AnyEnvelope = AnyEnvelope> = (message: M, tx: Tx) => Promise<HandlerResult>;

/**
 * A handler whose messages lock rows that several messages of one batch may share (an item's
 * stock, say), and that says which: `lockFirst` locks them, in the one order every path of the
 * service takes them, before any message of a group-committed batch runs. Two batches — or a batch
 * and a single delivery — that meet the same rows in different message orders then wait for each
 * other instead of deadlocking.
 */
export interface LocksFirst<Tx, M extends AnyEnvelope = AnyEnvelope> {
  lockFirst(messages: readonly M[], tx: Tx): Promise<void>;
}

/** Whether `handler` says what its batches lock first. */
export const locksFirst = <Tx, M extends AnyEnvelope>(
  handler: MessageHandler<Tx, M>,
): handler is MessageHandler<Tx, M> & LocksFirst<Tx, M> => 'lockFirst' in handler;
