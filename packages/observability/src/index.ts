export { runningTelemetry, startTelemetry, type Telemetry } from './telemetry.js';
export { createMetrics, type Metrics } from './metrics.js';
