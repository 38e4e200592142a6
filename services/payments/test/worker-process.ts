// A payment worker in its own process, so a test can SIGKILL it for real (fault switches from the environment).
import { faultsFromEnv } from '@idem/faults';
import { createLogger } from '@idem/runtime';
import { connectDatabase } from '../src/db.js';
import { createPaymentWorker } from '../src/workers/payment-worker.js';
import { SIMULATOR_API_KEY } from '../src/config.js';
import { createStripeClient } from '../src/providers/stripe.js';

const worker = createPaymentWorker({
  db: connectDatabase(process.env.DATABASE_URL!),
  stripe: createStripeClient({ apiKey: SIMULATOR_API_KEY, apiBase: process.env.STRIPE_API_BASE! }),
  log: createLogger('payments', 'silent'),
  faults: faultsFromEnv(),
  pollIntervalMs: 50,
  leaseMs: 500,
});
worker.start();
console.log('ready');
