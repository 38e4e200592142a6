export { createPublisher, type Publisher, type PublisherOptions } from './publisher.js';
export { DURABILITIES, NotDurableError, type Durability } from './durability.js';
export { startConsumer, type Consumer, type ConsumerOptions } from './consumer.js';
export {
  ConsumerRunner,
  deadLetterVerdict,
  DeadLetterWriteError,
  type ConsumerRunnerOptions,
  type Delivery,
  type DeliveryReport,
} from './consumer-runner.js';
export {
  replayDeadLetters,
  ReplayWindowError,
  ReplayTruncatedError,
  type ReplayFilter,
  type ReplayWindow,
} from './replay.js';
export { defaultDeliveryPolicy, jobOptions, maxRetrySpanMs, type DeliveryPolicy } from './delivery-policy.js';
export {
  asRedisUser,
  clusterReady,
  connectRedis,
  isClusterUrl,
  isRedisUrl,
  mastersOf,
  queueName,
  resolveBroker,
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
  rateLimitPrefix,
  REDIS_USER_COMMANDS,
  setRedisUser,
  type RedisUser,
} from './redis-users.js';
