import { register } from 'node:module';

export interface Telemetry {
  /** Flushes and stops tracing; never takes longer than a few seconds, even with no collector. */
  shutdown(): Promise<void>;
}

const off: Telemetry = { shutdown: async () => {} };

/**
 * Where the instrumentation entry leaves the running SDK for the application: a bundle carries
 * its own copy of this module, so a module-level variable would not be shared between the two.
 */
const RUNNING = Symbol.for('idem.telemetry');
type WithTelemetry = typeof globalThis & { [RUNNING]?: Telemetry };

/**
 * Starts OpenTelemetry tracing when OTEL_EXPORTER_OTLP_ENDPOINT is set (OTLP over HTTP, e.g.
 * to Jaeger), and does nothing otherwise. Only the instrumentation entry
 * (`node --import <instrumentation>`) calls it, so it runs before any module it instruments
 * (http, express, pg, ioredis) is loaded; the ESM loader hook lets the instrumentations see
 * modules imported as ESM, bundled applications included. Metrics stay on Prometheus and logs
 * on stdout: nothing but traces goes over OTLP (Jaeger accepts nothing else).
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
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [
      new http.HttpInstrumentation({
        ignoreIncomingRequestHook: (req) => req.url === '/health' || req.url === '/metrics',
      }),
      new express.ExpressInstrumentation(),
      new pg.PgInstrumentation({ requireParentSpan: true }),
      // The command's name only: its arguments are the jobs BullMQ's scripts add, whose bodies
      // carry customers' addresses and payment methods (the default serializer records them).
      new ioredis.IORedisInstrumentation({ requireParentSpan: true, dbStatementSerializer: (command) => command }),
    ],
  });
  sdk.start();
  const telemetry: Telemetry = {
    // An unreachable collector makes the SDK's shutdown wait for its export timeouts; do not let it hold the process.
    shutdown: () =>
      Promise.race([sdk.shutdown().catch(() => {}), new Promise<void>((resolve) => setTimeout(resolve, 3000).unref())]),
  };
  (globalThis as WithTelemetry)[RUNNING] = telemetry;
  return telemetry;
}

/** The tracing the instrumentation entry started in this process, or one that does nothing. */
export function runningTelemetry(): Telemetry {
  return (globalThis as WithTelemetry)[RUNNING] ?? off;
}
