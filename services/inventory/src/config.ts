import { baseConfigSchema, parseConfig } from '@idem/runtime';
import { z } from 'zod';

export const configSchema = baseConfigSchema('inventory', 3002).extend({
  /**
   * How long a reservation may hold stock without its payment completing; then it expires, its
   * stock goes back and the order is cancelled. Looked for every RESERVATION_SWEEP_MS.
   * @defaultValue 15 minutes
   */
  RESERVATION_TTL_MS: z.coerce
    .number()
    .int()
    .positive()
    .default(15 * 60_000),
  /** @defaultValue 10 seconds */
  RESERVATION_SWEEP_MS: z.coerce.number().int().positive().default(10_000),
});
export type InventoryConfig = ReturnType<typeof loadConfig>;

export function loadConfig(env: NodeJS.ProcessEnv = process.env) {
  return parseConfig(configSchema, env);
}
