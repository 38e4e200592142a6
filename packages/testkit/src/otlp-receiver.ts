import { createServer, type Server } from 'node:http';

/** A span as OTLP/HTTP JSON carries it, with the service that sent it. */
export interface ReceivedSpan {
  service: string;
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  kind: number;
  links: { traceId: string; spanId: string }[];
  attributes: Record<string, unknown>;
}

/**
 * A local OTLP/HTTP (JSON) trace receiver, so tests see what Jaeger would. `paths` records the
 * path of every export (`/v1/traces`, `/v1/metrics`, `/v1/logs`).
 */
export async function startOtlpReceiver(): Promise<{
  endpoint: string;
  spans: ReceivedSpan[];
  paths: string[];
  close(): Promise<void>;
}> {
  const spans: ReceivedSpan[] = [];
  const paths: string[] = [];
  const server: Server = createServer((req, res) => {
    paths.push(req.url ?? '');
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      try {
        collect(JSON.parse(body) as OtlpExport, spans);
      } catch {
        // not JSON (e.g. protobuf): ignored
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    paths,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  doubleValue?: number;
}
interface OtlpExport {
  resourceSpans?: {
    resource?: { attributes?: { key: string; value: OtlpValue }[] };
    scopeSpans?: {
      spans?: {
        name: string;
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        kind: number;
        links?: { traceId: string; spanId: string }[];
        attributes?: { key: string; value: OtlpValue }[];
      }[];
    }[];
  }[];
}

function collect(payload: OtlpExport, into: ReceivedSpan[]): void {
  const value = (v: OtlpValue) => v.stringValue ?? v.intValue ?? v.boolValue ?? v.doubleValue;
  for (const resourceSpans of payload.resourceSpans ?? []) {
    const service = resourceSpans.resource?.attributes?.find((a) => a.key === 'service.name')?.value.stringValue ?? '';
    for (const scope of resourceSpans.scopeSpans ?? []) {
      for (const span of scope.spans ?? []) {
        into.push({
          service,
          name: span.name,
          traceId: span.traceId,
          spanId: span.spanId,
          parentSpanId: span.parentSpanId || undefined,
          kind: span.kind,
          links: (span.links ?? []).map((l) => ({ traceId: l.traceId, spanId: l.spanId })),
          attributes: Object.fromEntries((span.attributes ?? []).map((a) => [a.key, value(a.value)])),
        });
      }
    }
  }
}
