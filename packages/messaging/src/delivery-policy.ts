import type { JobsOptions } from 'bullmq';

/** How BullMQ retries and retains each delivery. Publisher and replay use the same policy. */
export interface DeliveryPolicy {
  /** Deliveries per message before a transient failure becomes a dead letter. @defaultValue 8 */
  readonly attempts: number;
  /** First retry delay; doubles per attempt (BullMQ exponential backoff). @defaultValue 1000 */
  readonly backoffDelayMs: number;
  /** How long completed jobs are kept (and so how long jobId dedupe lasts). @defaultValue 24 h */
  readonly keepCompletedMs: number;
  /** How long failed jobs are kept in Redis (dead letters are kept in the database regardless). @defaultValue 7 days */
  readonly keepFailedMs: number;
}

/** 8 attempts with exponential backoff from 1 s; completed jobs kept a day, failed ones a week. */
export const defaultDeliveryPolicy: DeliveryPolicy = {
  attempts: 8,
  backoffDelayMs: 1000,
  keepCompletedMs: 24 * 3_600_000,
  keepFailedMs: 7 * 24 * 3_600_000,
};

/** The BullMQ options of one message's job: its id is the message id. */
export function jobOptions(policy: DeliveryPolicy, messageId: string): JobsOptions {
  return {
    // BullMQ ignores an add whose jobId still exists, which stops most duplicate publications
    // early. It is only a first line of defence: once a job is removed (see keepCompletedMs)
    // the same id is accepted again, and it never covers redelivery after a consumer crash.
    // The inbox's processed-message record is the guarantee.
    jobId: messageId,
    attempts: policy.attempts,
    backoff: { type: 'exponential', delay: policy.backoffDelayMs },
    removeOnComplete: { age: Math.ceil(policy.keepCompletedMs / 1000) },
    removeOnFail: { age: Math.ceil(policy.keepFailedMs / 1000) },
  };
}

/** The longest time from a first delivery to its last retry: one input of the inbox's replay horizon. */
export function maxRetrySpanMs(policy: DeliveryPolicy): number {
  let span = 0;
  for (let attempt = 1; attempt < policy.attempts; attempt++) span += policy.backoffDelayMs * 2 ** (attempt - 1);
  return span;
}
