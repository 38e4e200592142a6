export { createInbox, Inbox, type InboxOptions, type MessageHandler, type ConflictingDuplicate } from './inbox.js';
export { hasOneStatement, type OneStatementEffect, type OneStatementHandler } from './one-statement.js';
export * from './outcomes.js';
export { classifyFailure, isProcessedMessageConflict, type FailureClassification } from './database-errors.js';
export { advanceAggregateVersion, aggregateVersionAdvance, type AggregateVersion } from './aggregate-versions.js';
export type { DeadLetter, DeadLetterCursor, DeadLetterFilter, DeadLetters, NewDeadLetter } from './dead-letters.js';
export {
  createInboxRetention,
  replayHorizonMs,
  RetentionError,
  type InboxRetention,
  type InboxRetentionOptions,
  type Purge,
  type ReplayHorizon,
} from './retention.js';
export { bodyHash } from './body-hash.js';
export { DEFAULT_PARTITION_SPAN_MS, isProcessedMessagesKey, type DroppedPartition } from './partitions.js';
export { inboxTables, aggregateVersionTables } from './tables.js';
