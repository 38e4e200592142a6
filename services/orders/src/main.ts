// orders: the HTTP API, its outbox relay, and the consumers that move orders through their
// states.
// Entrypoint of the container and of the native run; the composition root is service.ts.
// Tracing, when configured, was started before this module by the instrumentation entry
// (`node --import …/instrumentation`), so that everything imported here is instrumented.
import { runningTelemetry } from '@idem/observability';
import { createLogger, stopOnSignal } from '@idem/runtime';
import { loadConfig } from './config.js';
import { startOrders } from './service.js';

const config = loadConfig();
const running = await startOrders(config);
stopOnSignal(
  async () => {
    await running.stop();
    await runningTelemetry().shutdown();
  },
  createLogger('orders', config.LOG_LEVEL),
);
