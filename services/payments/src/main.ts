// payments: payment attempts per order, charged and refunded through Stripe with persisted
// idempotency keys.
// Entrypoint of the container and of the native run; the composition root is service.ts.
// Tracing, when configured, was started before this module by the instrumentation entry
// (`node --import …/instrumentation`), so that everything imported here is instrumented.
import { runningTelemetry } from '@idem/observability';
import { createLogger, stopOnSignal } from '@idem/runtime';
import { loadConfig } from './config.js';
import { startPayments } from './service.js';

const config = loadConfig();
const running = await startPayments(config);
stopOnSignal(
  async () => {
    await running.stop();
    await runningTelemetry().shutdown();
  },
  createLogger('payments', config.LOG_LEVEL),
);
