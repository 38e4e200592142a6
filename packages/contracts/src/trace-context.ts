import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
} from '@opentelemetry/api';

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

const tracer = trace.getTracer('@idem/contracts');

/**
 * Runs `work` in a span of its own. `continues` is the `traceparent` a work item kept from the
 * delivery that created it (a payment attempt, an e-mail): a worker that picks the item up later,
 * outside any request, then goes on with that trace instead of starting a new one, so an order's
 * trace reaches its provider call, the messages that call leads to, and its e-mails.
 */
export function inSpan<T>(
  name: string,
  options: {
    continues?: string | null;
    /** `client`: a call to another system (a provider, a mail server). */
    kind?: 'client';
    attributes?: Attributes;
  },
  work: () => Promise<T>,
): Promise<T> {
  const parent = contextOf(options.continues ?? undefined) ?? context.active();
  const kind = options.kind === 'client' ? SpanKind.CLIENT : SpanKind.INTERNAL;
  return tracer.startActiveSpan(name, { kind, attributes: options.attributes }, parent, async (span) => {
    try {
      return await work();
    } catch (error) {
      span.recordException(error as Error);
      span.setStatus({ code: SpanStatusCode.ERROR });
      throw error;
    } finally {
      span.end();
    }
  });
}
