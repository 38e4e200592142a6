import { baseConfigSchema, parseConfig } from '@idem/runtime';
import { z } from 'zod';

export const configSchema = baseConfigSchema('notifications', 3004).extend({
  /** Where emails go: the SMTP sink (or Mailpit) locally. May carry credentials; never logged. */
  SMTP_URL: z.url().default('smtp://127.0.0.1:1025'),
  /**
   * The provider's message search (Mailpit's API: the SMTP sink's or Mailpit's address), asked before
   * an email whose reply was lost is sent again. Unset (or empty): such an email is sent again.
   */
  SMTP_LOOKUP_URL: z.preprocess((value) => (value === '' ? undefined : value), z.url().optional()),
  EMAIL_FROM: z.string().min(3).default('idem shop <shop@idem.local>'),
  EMAIL_MAX_ATTEMPTS: z.coerce.number().int().positive().default(8),
  DISPATCHER_LEASE_MS: z.coerce.number().int().positive().default(60_000),
  DISPATCHER_POLL_MS: z.coerce.number().int().positive().default(500),
  EMAIL_RETRY_DELAY_MS: z.coerce.number().int().positive().default(1000),
  /** SMTP connections the dispatcher keeps open: the sends under way at once, and so the pace of a backlog. */
  SMTP_CONNECTIONS: z.coerce.number().int().positive().default(5),
  /** Each SMTP wait (connect, greeting, silence); the dispatcher's lease must outlast one send (three of them). */
  SMTP_TIMEOUT_MS: z.coerce.number().int().positive().default(4000),
});
export type NotificationsConfig = ReturnType<typeof loadConfig>;

export function loadConfig(env: NodeJS.ProcessEnv = process.env) {
  return parseConfig(configSchema, env);
}
