/**
 * What the repository's tools may use of the orders service besides running it: its consumers'
 * handlers, its use cases and its database, as the explorer (infra/explorer) drives them.
 */
export { handlePaymentCaptured } from './consumers/payment-captured.js';
export { handlePaymentFailed } from './consumers/payment-failed.js';
export { handlePaymentRefunded } from './consumers/payment-refunded.js';
export { handleReservationExpired } from './consumers/reservation-expired.js';
export { handleStockRejected } from './consumers/stock-rejected.js';
export { handleStockReserved } from './consumers/stock-reserved.js';
export { cancelOrder } from './application/cancel-order.js';
export { createOrder } from './application/orders.js';
export { connectDatabase, type PrismaClient, type Tx } from './db.js';
export { PACKAGE_TABLES } from './tables.js';
