// payments: payment attempts per order, charged and refunded through Stripe with persisted
// idempotency keys.
// Entrypoint of the container and of the native run; the composition root is service.ts.
import { startTelemetry } from '@idem/observability';

// Tracing starts before anything it instruments (http, express, pg, ioredis) is loaded, so the
// rest of the service is imported only afterwards.
const telemetry = await startTelemetry('payments');
const { createLogger, stopOnSignal } = await import('@idem/runtime');
const { loadConfig } = await import('./config.js');
const { startPayments } = await import('./service.js');

const config = loadConfig();
const running = await startPayments(config);
stopOnSignal(
  async () => {
    await running.stop();
    await telemetry.shutdown();
  },
  createLogger('payments', config.LOG_LEVEL),
);
