import { contextOf, type AnyEnvelope } from '@idem/contracts';
import { isSettled, type DeliveryOutcome } from '@idem/inbox';
import { context, SpanKind, SpanStatusCode, trace, type Link, type Span } from '@opentelemetry/api';

const tracer = trace.getTracer('@idem/transport');

/**
 * The consumer span, started when handling starts (not when the broker handed the message over),
 * linked to the producer's `send` span, with OpenTelemetry's messaging attributes (`system` is the
 * broker's name). The inbox transaction's database spans nest under it.
 */
export function startProcess(
  system: string,
  consumer: string,
  { messageId, attempt }: { messageId: string; attempt: number },
  envelope: AnyEnvelope | undefined,
): Span {
  const producer = contextOf(envelope?.traceparent);
  const producerSpan = producer ? trace.getSpanContext(producer) : undefined;
  const links: Link[] = producerSpan ? [{ context: producerSpan }] : [];
  return tracer.startSpan(`process ${consumer}`, {
    kind: SpanKind.CONSUMER,
    links,
    attributes: {
      'messaging.system': system,
      'messaging.operation.type': 'process',
      'messaging.operation.name': 'process',
      'messaging.destination.name': consumer,
      'messaging.consumer.group.name': consumer,
      'messaging.message.id': messageId,
      'messaging.message.delivery_attempt': attempt,
      ...(envelope
        ? {
            'idem.contract': envelope.type,
            'idem.producer': envelope.producer,
            'idem.correlation_id': envelope.correlationId,
            ...(envelope.causationId ? { 'idem.causation_id': envelope.causationId } : {}),
          }
        : {}),
    },
  });
}

/** Ends a consumer span with how the delivery ended. */
export function endProcess(span: Span, outcome: DeliveryOutcome, deadLettered: boolean): void {
  span.setAttribute('idem.outcome', outcome.outcome);
  if (!isSettled(outcome))
    span.setStatus({ code: SpanStatusCode.ERROR, message: `${outcome.code}: ${outcome.reason}` });
  if (deadLettered) span.setAttribute('idem.dead_lettered', true);
  span.end();
}

/** Runs `work` with `span` active, so the spans it makes (the inbox's SQL) nest under it and its log lines carry it. */
export const under = <T>(span: Span, work: () => T): T => context.with(trace.setSpan(context.active(), span), work);

/** A group commit's span: one transaction for several deliveries, linked to each delivery's span. */
export const startCommit = (consumer: string, deliveries: readonly Span[]): Span =>
  tracer.startSpan(`commit ${consumer}`, {
    links: deliveries.map((span) => ({ context: span.spanContext() })),
    attributes: { 'messaging.destination.name': consumer, 'messaging.batch.message_count': deliveries.length },
  });
