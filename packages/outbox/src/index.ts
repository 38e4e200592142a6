export { enqueue, enqueueInOneStatement, OUTBOX_CHANNEL, type EventInOneStatement } from './enqueue.js';
export { handoffFor, OutboxHandoff, SWEEP_AFTER_MS, type HandoffOptions } from './handoff.js';
export {
  createPooledRelay,
  createRelay,
  POOLED_RELAY_CONCURRENCY,
  type Relay,
  type RelayBatch,
  type RelayOptions,
} from './relay.js';
export {
  listParked,
  outboxBacklog,
  purgePublished,
  retryParked,
  type OutboxBacklog,
  type ParkedRow,
} from './maintenance.js';
export { outboxTables } from './tables.js';
