/**
 * What the repository's tools may use of the inventory service besides running it: its consumers'
 * handlers, its use cases and its database, as the explorer (infra/explorer) drives them.
 */
export { handleOrderCancelled } from './consumers/order-cancelled.js';
export { handleOrderPlaced } from './consumers/order-placed.js';
export { handlePaymentCaptured } from './consumers/payment-captured.js';
export { handlePaymentFailed } from './consumers/payment-failed.js';
export { releaseReservation } from './application/stock.js';
export { connectDatabase, type PrismaClient, type Tx } from './db.js';
export { PACKAGE_TABLES } from './tables.js';
