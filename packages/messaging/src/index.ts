export { createPublisher, type Publisher, type PublisherOptions } from './publisher.js';
export { DURABILITIES, NotDurableError, type Durability } from './durability.js';
export { startConsumer, type Consumer, type ConsumerOptions } from './consumer.js';
export { bullmq, type BullmqOptions } from './transport.js';
export { jobOptions } from './delivery-policy.js';
export { subscribersOf, subscriptionOf } from './subscriptions.js';
// The transport-neutral part, for code written against BullMQ before the seam.
export {
  ConsumerRunner,
  deadLetterVerdict,
  DeadLetterWriteError,
  defaultDeliveryPolicy,
  maxRetrySpanMs,
  replayDeadLetters,
  ReplayWindowError,
  ReplayTruncatedError,
  type ConsumerRunnerOptions,
  type DeliveryPolicy,
  type Delivery,
  type DeliveryReport,
  type ReplayFilter,
  type ReplayWindow,
} from '@idem/transport';
export {
  asRedisUser,
  clusterReady,
  connectRedis,
  isClusterUrl,
  isRedisUrl,
  mastersOf,
  queueName,
  resolveBroker,
  whenReady,
  type BrokerOptions,
  type RedisClient,
} from './redis.js';
export {
  createDeliveryJournal,
  deliveryEntry,
  deliveryFields,
  journalKey,
  publicationEntries,
  readJournal,
  type DeliveryEntry,
  type DeliveryJournal,
  type JournalCursor,
  type JournalEntry,
  type PublicationEntry,
  type ProviderCallEntry,
} from './journal.js';
export { killRunawayScripts } from './runaway-scripts.js';
export {
  aclFileLine,
  aclFileTemplate,
  aclRules,
  deleteRedisUser,
  redisUserOf,
  consoleRedisUser,
  kedaRedisUser,
  scriptWatcherRedisUser,
  rateLimitPrefix,
  REDIS_USER_COMMANDS,
  setRedisUser,
  type Reach,
  type RedisUser,
} from './redis-users.js';
