import { baseConfigSchema, parseConfig } from '@idem/runtime';
import { z } from 'zod';

/** Where the native run starts the Stripe simulator, and its key (a simulator serving a network has one of its own, beginning so). */
const SIMULATOR = { base: 'http://127.0.0.1:12111', key: 'sk_test_idem_simulator' } as const;
export const SIMULATOR_API_KEY = SIMULATOR.key;

export const configSchema = baseConfigSchema('payments', 3003)
  .extend({
    /**
     * Who takes the payments: `simulator` (infra/stripe-sim, the default) or `stripe` (real
     * Stripe). Chosen explicitly, so nothing ever falls back to the simulator silently.
     */
    PAYMENT_PROVIDER: z.enum(['simulator', 'stripe']).default('simulator'),
    /** A Stripe secret key (`sk_test_…`, `sk_live_…`, or a restricted `rk_…`); never logged. */
    STRIPE_API_KEY: z.string().min(1).optional(),
    /** Where the provider is: the simulator's URL, or unset for api.stripe.com. */
    STRIPE_API_BASE: z.url().optional(),
    PAYMENT_WORKER_LEASE_MS: z.coerce.number().int().positive().default(60_000),
    /** How long one Stripe request may take; the worker's lease must outlast two (the SDK retries a dropped connection once). */
    STRIPE_TIMEOUT_MS: z.coerce.number().int().positive().default(20_000),
    PAYMENT_WORKER_POLL_MS: z.coerce.number().int().positive().default(500),
    PAYMENT_RETRY_DELAY_MS: z.coerce.number().int().positive().default(1000),
    /**
     * How long after a call the provider's search may still miss the payment it made: a payment
     * whose answer was lost is looked up no sooner (Stripe: under a minute, longer in an outage).
     */
    PROVIDER_SEARCH_LAG_MS: z.coerce.number().int().positive().default(300_000),
  })
  .superRefine((config, context) => {
    const key = config.STRIPE_API_KEY;
    const problem = (path: string, message: string) => context.addIssue({ code: 'custom', path: [path], message });
    // A lease a provider call can outlast lets a second worker call again while the first still waits.
    if (config.PAYMENT_WORKER_LEASE_MS <= 2 * config.STRIPE_TIMEOUT_MS)
      problem(
        'PAYMENT_WORKER_LEASE_MS',
        `must be longer than two Stripe requests (2 × STRIPE_TIMEOUT_MS = ${2 * config.STRIPE_TIMEOUT_MS} ms): a call may still be under way when the lease ends`,
      );
    if (config.PAYMENT_PROVIDER === 'simulator') {
      if (key && !key.startsWith(SIMULATOR.key))
        problem(
          'STRIPE_API_KEY',
          `a real key is set while PAYMENT_PROVIDER is simulator, which accepts only its own (${SIMULATOR.key}…); set PAYMENT_PROVIDER=stripe to use Stripe, or unset the key`,
        );
      return;
    }
    if (!key) return problem('STRIPE_API_KEY', 'PAYMENT_PROVIDER=stripe needs your Stripe secret key (sk_test_…)');
    if (key.startsWith(SIMULATOR.key) || !/^(sk|rk)_(test|live)_\w+$/.test(key))
      problem('STRIPE_API_KEY', 'not a Stripe secret key (sk_test_…, sk_live_… or rk_…)');
    if (config.STRIPE_API_BASE && new URL(config.STRIPE_API_BASE).protocol !== 'https:')
      problem(
        'STRIPE_API_BASE',
        `a real Stripe key is sent only over https, not to ${new URL(config.STRIPE_API_BASE).origin}; leave STRIPE_API_BASE unset for api.stripe.com`,
      );
  });
export type PaymentsConfig = ReturnType<typeof loadConfig>;

export function loadConfig(env: NodeJS.ProcessEnv = process.env) {
  const config = parseConfig(configSchema, env);
  return config.PAYMENT_PROVIDER === 'simulator'
    ? {
        ...config,
        STRIPE_API_BASE: config.STRIPE_API_BASE ?? SIMULATOR.base,
        // The simulator's own key where it serves a network; its public placeholder on this machine.
        STRIPE_API_KEY: config.STRIPE_API_KEY ?? SIMULATOR.key,
      }
    : { ...config, STRIPE_API_KEY: config.STRIPE_API_KEY! };
}
