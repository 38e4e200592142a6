// The Stripe-compatible payment simulator on STRIPE_SIM_PORT (default 12111).
// STRIPE_SIM_ERROR_AFTER_CREATE / STRIPE_SIM_DROP_AFTER_CREATE: fault probabilities (0..1).
// ALLOWED_HOSTS: host:port,… it answers to besides 127.0.0.1 and localhost on its port.
// HOST: the address it binds (loopback unless told otherwise; its image sets 0.0.0.0).
// STRIPE_SIM_API_KEY: the key it accepts (beyond loopback, one of its own is required; sk_test_idem_simulator_…).
import { hostList } from '@idem/http';
import { createStripeSimulator } from './simulator.js';

const port = Number(process.env.STRIPE_SIM_PORT ?? process.env.PORT ?? 12111);
const host = process.env.HOST ?? '127.0.0.1';
const simulator = createStripeSimulator({
  faults: {
    errorAfterCreate: Number(process.env.STRIPE_SIM_ERROR_AFTER_CREATE ?? 0),
    dropAfterCreate: Number(process.env.STRIPE_SIM_DROP_AFTER_CREATE ?? 0),
  },
  latencyMs: Number(process.env.STRIPE_SIM_LATENCY_MS ?? 0),
  allowedHosts: hostList(process.env.ALLOWED_HOSTS),
  host,
  ...(process.env.STRIPE_SIM_API_KEY ? { apiKey: process.env.STRIPE_SIM_API_KEY } : {}),
});
const server = simulator.app.listen(port, host, () => {
  console.log(
    JSON.stringify({ service: 'stripe-sim', msg: `Stripe simulator listening on :${port} (state in memory)` }),
  );
});
const stop = () => server.close(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
