// orders: the HTTP API, its outbox relay, and the consumers that move orders through their
// states.
// Entrypoint of the container and of the native run; the composition root is service.ts.
import { startTelemetry } from '@idem/observability';

// Tracing starts before anything it instruments (http, express, pg, ioredis) is loaded, so the
// rest of the service is imported only afterwards.
const telemetry = await startTelemetry('orders');
const { createLogger, stopOnSignal } = await import('@idem/runtime');
const { loadConfig } = await import('./config.js');
const { startOrders } = await import('./service.js');

const config = loadConfig();
const running = await startOrders(config);
stopOnSignal(
  async () => {
    await running.stop();
    await telemetry.shutdown();
  },
  createLogger('orders', config.LOG_LEVEL),
);
