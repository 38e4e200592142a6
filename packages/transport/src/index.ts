export {
  acceptedWithin,
  consumerRunnerOf,
  PUBLISH_TIMEOUT_MS,
  subscriptionsOf,
  UnservedSubscriptionError,
  type Consumer,
  type ConsumerOptions,
  type Publisher,
  type PublisherOptions,
  type Transport,
} from './transport.js';
export {
  ConsumerRunner,
  deadLetterVerdict,
  DeadLetterWriteError,
  messageIdOf,
  type ConsumerRunnerOptions,
  type Delivery,
  type DeliveryReport,
  type Received,
  type Settlement,
} from './consumer-runner.js';
export {
  backoffMs,
  defaultDeliveryPolicy,
  maxRetrySpanMs,
  replayHorizonOf,
  type DeliveryPolicy,
} from './delivery-policy.js';
export {
  replayDeadLetters,
  ReplayWindowError,
  ReplayTruncatedError,
  type ReplayFilter,
  type ReplayWindow,
} from './replay.js';
