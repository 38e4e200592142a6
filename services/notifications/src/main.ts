// notifications: durable email work items written by its consumers, sent by a dispatcher.
// Composition root; see service.ts.
import { createLogger, stopOnSignal } from '@idem/runtime';
import { loadConfig } from './config.js';
import { startNotifications } from './service.js';

const config = loadConfig();
const running = await startNotifications(config);
stopOnSignal(running.stop, createLogger('notifications', config.LOG_LEVEL));
