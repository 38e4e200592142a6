// inventory: reserves and releases stock.
// Entrypoint of the container and of the native run; the composition root is service.ts.
import { startTelemetry } from '@idem/observability';

// Tracing starts before anything it instruments (http, express, pg, ioredis) is loaded, so the
// rest of the service is imported only afterwards.
const telemetry = await startTelemetry('inventory');
const { createLogger, stopOnSignal } = await import('@idem/runtime');
const { loadConfig } = await import('./config.js');
const { startInventory } = await import('./service.js');

const config = loadConfig();
const running = await startInventory(config);
stopOnSignal(
  async () => {
    await running.stop();
    await telemetry.shutdown();
  },
  createLogger('inventory', config.LOG_LEVEL),
);
