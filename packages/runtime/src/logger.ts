import { pino, type Logger } from 'pino';
import { deliveryFields, type DeliveryReport } from '@idem/messaging';

export type { Logger };

/** JSON lines on stdout; secrets are redacted wherever they might appear. */
export function createLogger(service: string, level: string): Logger {
  return pino({
    name: service,
    level,
    base: { service },
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
