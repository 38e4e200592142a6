// The instrumentation entry, loaded before the application as OpenTelemetry documents for ESM:
//   node --import ./dist/instrumentation.js dist/main.js
// A bundle hoists its imports above any code it runs, so a service cannot start tracing from
// its own main module: express, pg and ioredis would already be loaded, and never patched.
// The service is named by OTEL_SERVICE_NAME, as every OpenTelemetry SDK reads it.
import { startTelemetry } from './telemetry.js';

await startTelemetry(process.env.OTEL_SERVICE_NAME ?? 'unknown_service:node');
