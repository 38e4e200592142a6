import { baseConfigSchema, parseConfig } from '@idem/runtime';
import { z } from 'zod';

const SIMULATOR = 'http://127.0.0.1:12111';

export const configSchema = baseConfigSchema('payments', 3003).extend({
  /** A Stripe secret key (test mode). Never logged. */
  STRIPE_API_KEY: z.string().min(1).optional(),
  /** A Stripe-compatible server; unset with a STRIPE_API_KEY set means real Stripe. */
  STRIPE_API_BASE: z.url().optional(),
  PAYMENT_WORKER_LEASE_MS: z.coerce.number().int().positive().default(60_000),
  PAYMENT_WORKER_POLL_MS: z.coerce.number().int().positive().default(500),
  PAYMENT_RETRY_DELAY_MS: z.coerce.number().int().positive().default(1000),
});
export type PaymentsConfig = ReturnType<typeof loadConfig>;

export function loadConfig(env: NodeJS.ProcessEnv = process.env) {
  const config = parseConfig(configSchema, env);
  return {
    ...config,
    // With neither variable set, talk to the local simulator with a placeholder key.
    STRIPE_API_BASE: config.STRIPE_API_BASE ?? (config.STRIPE_API_KEY ? undefined : SIMULATOR),
    STRIPE_API_KEY: config.STRIPE_API_KEY ?? 'sk_test_idem_simulator',
  };
}
