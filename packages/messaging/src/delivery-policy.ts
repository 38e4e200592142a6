import type { DeliveryPolicy } from '@idem/transport';
import type { JobsOptions } from 'bullmq';

/** The BullMQ options of one message's job under a delivery policy: its id is the message id. */
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
