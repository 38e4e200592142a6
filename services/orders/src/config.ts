import { baseConfigSchema, parseConfig } from '@idem/runtime';
import { z } from 'zod';

export const configSchema = baseConfigSchema('orders', 3001).extend({
  /** How long an Idempotency-Key and its stored response are kept. @defaultValue 24 h */
  IDEMPOTENCY_KEY_RETENTION_MS: z.coerce
    .number()
    .int()
    .positive()
    .default(24 * 3_600_000),
});
export type OrdersConfig = ReturnType<typeof loadConfig>;

export function loadConfig(env: NodeJS.ProcessEnv = process.env) {
  return parseConfig(configSchema, env);
}
