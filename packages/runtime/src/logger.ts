import { deliveryFields, type DeliveryReport } from '@idem/messaging';
import { isSpanContextValid, trace } from '@opentelemetry/api';
import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * The span a line is written in, under OpenTelemetry's names for log correlation: a line leads to
 * its trace in Jaeger (search by trace id), and a span to its lines. None outside a span.
 */
export function traceFields(): { trace_id?: string; span_id?: string; trace_flags?: string } {
  const span = trace.getActiveSpan()?.spanContext();
  if (!span || !isSpanContextValid(span)) return {};
  return { trace_id: span.traceId, span_id: span.spanId, trace_flags: `0${span.traceFlags.toString(16)}` };
}

/** JSON lines on stdout, each with the trace it was written in; secrets are redacted wherever they might appear. */
export function createLogger(service: string, level: string): Logger {
  return pino({
    name: service,
    level,
    base: { service },
    mixin: traceFields,
    redact: [
      '*.password',
      '*.token',
      '*.apiKey',
      'config.ADMIN_TOKEN',
      'config.ADMIN_TOKENS',
      'config.JWT_SECRET',
      'config.STRIPE_API_KEY',
      'config.SMTP_URL',
    ],
  });
}

/** One line per delivery, with the ids a person needs to follow a message through the system. */
export function logDelivery(log: Logger, report: DeliveryReport): void {
  const { outcome } = report;
  const fields = { ...deliveryFields(report), ...(report.deadLettered ? { deadLettered: true } : {}) };
  if (outcome.outcome === 'conflicting_duplicate')
    log.error(fields, 'producer reused a message id with a different body');
  else if (report.deadLettered) log.error(fields, 'delivery dead-lettered');
  else if (outcome.outcome === 'transient_failure') log.warn(fields, 'delivery failed, will be retried');
  else log.info(fields, `delivery ${outcome.outcome}`);
}
