// orders: the HTTP API, its outbox relay, and the consumers that move orders through their
// states. Composition root; see service.ts.
import { createLogger, stopOnSignal } from '@idem/runtime';
import { loadConfig } from './config.js';
import { startOrders } from './service.js';

const config = loadConfig();
const running = await startOrders(config);
stopOnSignal(running.stop, createLogger('orders', config.LOG_LEVEL));
