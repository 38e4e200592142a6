export { enqueue, OUTBOX_CHANNEL } from './enqueue.js';
export { createRelay, type Relay, type RelayBatch, type RelayOptions } from './relay.js';
export { outboxBacklog, purgePublished, type OutboxBacklog } from './maintenance.js';
