import { register } from 'node:module';

export interface Telemetry {
  /** Flushes and stops tracing; never takes longer than a few seconds, even with no collector. */
  shutdown(): Promise<void>;
}

const off: Telemetry = { shutdown: async () => {} };

/**
 * Starts OpenTelemetry tracing when OTEL_EXPORTER_OTLP_ENDPOINT is set (OTLP over HTTP, e.g.
 * to Jaeger), and does nothing otherwise. Call it first, and import everything it should
 * instrument (express, pg, ioredis) only afterwards: each service's main.ts does, with dynamic
 * imports. The ESM loader hook lets the instrumentations see modules imported as ESM.
 */
export async function startTelemetry(serviceName: string, env: NodeJS.ProcessEnv = process.env): Promise<Telemetry> {
  if (!env.OTEL_EXPORTER_OTLP_ENDPOINT) return off;
  register('@opentelemetry/instrumentation/hook.mjs', import.meta.url);
  const [{ NodeSDK }, { OTLPTraceExporter }, http, express, pg, ioredis] = await Promise.all([
    import('@opentelemetry/sdk-node'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/instrumentation-http'),
    import('@opentelemetry/instrumentation-express'),
    import('@opentelemetry/instrumentation-pg'),
    import('@opentelemetry/instrumentation-ioredis'),
  ]);
  const sdk = new NodeSDK({
    serviceName,
    traceExporter: new OTLPTraceExporter(),
    instrumentations: [
      new http.HttpInstrumentation({
        ignoreIncomingRequestHook: (req) => req.url === '/health' || req.url === '/metrics',
      }),
      new express.ExpressInstrumentation(),
      new pg.PgInstrumentation({ requireParentSpan: true }),
      new ioredis.IORedisInstrumentation({ requireParentSpan: true }),
    ],
  });
  sdk.start();
  return {
    // An unreachable collector makes the SDK's shutdown wait for its export timeouts; do not let it hold the process.
    shutdown: () =>
      Promise.race([sdk.shutdown().catch(() => {}), new Promise<void>((resolve) => setTimeout(resolve, 3000).unref())]),
  };
}
