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

/**
 * JSON lines on stdout, each with the trace it was written in; secrets are redacted wherever they
 * might appear. Lines are written in batches ({@link batchedLines}), shared by every logger of the
 * process so that they keep their order.
 */
export function createLogger(service: string, level: string): Logger {
  stdout ??= batchedLines(pino.destination({ dest: 1, sync: true }));
  return pino(
    {
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
        'config.SMTP_LOOKUP_URL',
      ],
    },
    stdout,
  );
}

let stdout: ReturnType<typeof batchedLines> | undefined;

/** How long a line may wait for others to be written with. */
const LOG_BATCH_MS = 100;

/**
 * A logger's destination that writes its lines in batches: an info line waits up to `waitMs` for
 * the lines after it, and they go out in one write. A line per write costs the process a system
 * call and wakes whatever reads its output (compose's log driver, the native run) once a line; a
 * busy service writes one to four lines per order, and measured, those wakeups cost more than the
 * lines. A warning or worse is written at once, after the lines before it; what waits is written
 * when the process exits. A process killed outright (SIGKILL, as the fault switches do) loses the
 * info lines of its last `waitMs` — never a warning or an error.
 */
export function batchedLines(out: { write(lines: string): unknown }, waitMs = LOG_BATCH_MS) {
  let lines = '';
  let scheduled: NodeJS.Timeout | undefined;
  // While lines wait, the process's exit writes them.
  const flush = () => {
    if (scheduled) process.off('exit', flush);
    clearTimeout(scheduled);
    scheduled = undefined;
    if (lines === '') return;
    out.write(lines);
    lines = '';
  };
  return {
    // pino sets `lastLevel` before each write to a destination that asks for it.
    [pino.symbols.needsMetadataGsym]: true as const,
    lastLevel: 0,
    write(line: string) {
      lines += line;
      if (this.lastLevel >= pino.levels.values.warn!) flush();
      else if (!scheduled) {
        scheduled = setTimeout(flush, waitMs).unref();
        process.once('exit', flush);
      }
    },
    flush(done?: () => void) {
      flush();
      done?.();
    },
  };
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
