import { context, propagation, ROOT_CONTEXT, trace, type Context } from '@opentelemetry/api';

/**
 * Trace context travels inside the envelope (`traceparent`, W3C), not in broker headers, so it
 * survives the outbox: written with the row, carried by every republication. The OpenTelemetry
 * API is a no-op until an SDK is started (see @idem/observability).
 */
/** The context a `traceparent` names, or undefined when there is none. */
export function contextOf(traceparent: string | undefined): Context | undefined {
  if (!traceparent) return undefined;
  const extracted = propagation.extract(ROOT_CONTEXT, { traceparent });
  return trace.getSpanContext(extracted) ? extracted : undefined;
}

/** The `traceparent` of a context (the active one by default), or undefined when not tracing. */
export function traceparentOf(ctx: Context = context.active()): string | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return carrier.traceparent;
}
