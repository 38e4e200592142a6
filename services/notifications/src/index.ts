/**
 * What the repository's tools may use of the notifications service besides running it: its
 * consumers' handlers, its dispatcher and its database, as the explorer (infra/explorer) drives them.
 */
export { handleOrderPlaced } from './consumers/order-placed.js';
export { handlePaymentCaptured } from './consumers/payment-captured.js';
export { handlePaymentRefunded } from './consumers/payment-refunded.js';
export { connectDatabase, type PrismaClient, type Tx } from './db.js';
export { PACKAGE_TABLES } from './tables.js';
export { createDispatcher } from './workers/dispatcher.js';
