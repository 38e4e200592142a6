// payments: payment attempts per order, charged and refunded through Stripe with persisted
// idempotency keys. Composition root; see service.ts.
import { createLogger, stopOnSignal } from '@idem/runtime';
import { loadConfig } from './config.js';
import { startPayments } from './service.js';

const config = loadConfig();
const running = await startPayments(config);
stopOnSignal(running.stop, createLogger('payments', config.LOG_LEVEL));
