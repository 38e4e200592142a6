/**
 * What the repository's tools may use of the payments service besides running it: its consumers'
 * handlers, its worker and its database, as the explorer (infra/explorer) drives them.
 */
export { handleOrderCancelled } from './consumers/order-cancelled.js';
export { handleStockReserved } from './consumers/stock-reserved.js';
export { connectDatabase, type PrismaClient, type Tx } from './db.js';
export { newChargeKey } from './domain/payment-attempt.js';
export { createStripeClient } from './providers/stripe.js';
export { PACKAGE_TABLES } from './tables.js';
export { createPaymentWorker } from './workers/payment-worker.js';
