// inventory: reserves and releases stock. Composition root; see service.ts.
import { createLogger, stopOnSignal } from '@idem/runtime';
import { loadConfig } from './config.js';
import { startInventory } from './service.js';

const config = loadConfig();
const running = await startInventory(config);
stopOnSignal(running.stop, createLogger('inventory', config.LOG_LEVEL));
