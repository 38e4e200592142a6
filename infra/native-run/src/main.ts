// `pnpm start`: the whole system, natively. Ctrl-C stops everything.
import { dirname } from 'node:path';
import { unreachablePrerequisites } from './prerequisites.js';
import { SERVICES, startSystem, systemFromEnv } from './system.js';
import { operatorTokenFile, operatorTokensFor, operatorTokenVariable } from './tokens.js';

const { postgresUrl, portOffset, name, replicas } = systemFromEnv();
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const missing = await unreachablePrerequisites({
  postgres: { url: postgresUrl, variable: 'POSTGRES_URL' },
  redis: { url: redisUrl, variable: 'REDIS_URL' },
});
if (missing) {
  console.error(missing);
  process.exit(1);
}

const tokens = operatorTokensFor(name);
const system = await startSystem({
  postgresUrl,
  redisUrl,
  portOffset,
  name,
  replicas,
  restartOnExit: true,
  console: true,
  env: tokens,
});
/** A token as the console shows it: generated, or given (then not repeated). */
const shown = (variable: string) => (process.env[variable] ? `${variable}, as given` : tokens[variable]!);
console.log(`
idem is running${name ? ` as system "${name}" (databases *_${name}, queue prefix ${system.queuePrefix})` : ''}:
  console        ${system.urls.console}   (every delivery of an order, fault switches, the checker)
  orders         ${system.urls.orders}   (POST /orders, GET /orders/:id)
  inventory      ${system.urls.inventory}   (GET /stock/:sku)
  payments       ${system.urls.payments}   (GET /payments?orderId=)
  notifications  ${system.urls.notifications}   (GET /emails?orderId=)
  stripe-sim     ${system.urls.stripe}
  smtp-sink      ${system.urls.smtp}, mail API ${system.urls.mail}/api/v1/messages
operator tokens  (each API's opens that API alone; generated ones are saved in ${dirname(operatorTokenFile(name))}, where pnpm demo reads them)
${SERVICES.map((service) => `  ${service.padEnd(15)}${shown(operatorTokenVariable(service))}`).join('\n')}
  console        ${shown('ADMIN_TOKEN')}  (the console's and the doubles' login beyond loopback; opens no API)
Try: pnpm demo     Stop: Ctrl-C
`);
let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  console.log('stopping…');
  void system.stop().then(() => process.exit(0));
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
