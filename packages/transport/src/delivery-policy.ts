import type { ReplayHorizon } from '@idem/inbox';

/**
 * How a transport retries and keeps each delivery. The publisher, the consumer and replay use the
 * same policy, and the inbox's replay horizon is derived from it (`replayHorizonOf`).
 */
export interface DeliveryPolicy {
  /** Deliveries per message before a transient failure becomes a dead letter. @defaultValue 8 */
  readonly attempts: number;
  /** First retry delay; doubles per attempt (exponential backoff). @defaultValue 1000 */
  readonly backoffDelayMs: number;
  /**
   * How long the broker keeps a delivered message's id, and so how long it refuses a second
   * publication of it (BullMQ's completed jobs; RabbitMQ keeps none: 0 there). @defaultValue 24 h
   */
  readonly keepCompletedMs: number;
  /** How long a failed delivery stays at the broker (dead letters are kept in the database regardless). @defaultValue 7 days */
  readonly keepFailedMs: number;
}

/** 8 attempts with exponential backoff from 1 s; completed deliveries kept a day, failed ones a week. */
export const defaultDeliveryPolicy: DeliveryPolicy = {
  attempts: 8,
  backoffDelayMs: 1000,
  keepCompletedMs: 24 * 3_600_000,
  keepFailedMs: 7 * 24 * 3_600_000,
};

/** The delay before retry `attempt` (1 for the first retry): `backoffDelayMs` doubled per attempt. */
export const backoffMs = (policy: DeliveryPolicy, attempt: number): number =>
  policy.backoffDelayMs * 2 ** (attempt - 1);

/** The longest time from a first delivery to its last retry: one input of the inbox's replay horizon. */
export function maxRetrySpanMs(policy: DeliveryPolicy): number {
  let span = 0;
  for (let attempt = 1; attempt < policy.attempts; attempt++) span += backoffMs(policy, attempt);
  return span;
}

/**
 * The inbox's replay horizon for the policy a publisher really uses: how long the broker may still
 * hand out a copy (what it keeps), the retries' span, and the replay window an operator has. A
 * retention shorter than this lets a late copy apply twice; `createInboxRetention` refuses it.
 */
export function replayHorizonOf(policy: DeliveryPolicy, replayWindowMs: number): ReplayHorizon {
  return {
    brokerRetentionMs: Math.max(policy.keepCompletedMs, policy.keepFailedMs),
    maxRetrySpanMs: maxRetrySpanMs(policy),
    replayWindowMs,
  };
}
