// `pnpm start`: the whole system, natively. Ctrl-C stops everything.
import { unreachablePrerequisites } from './prerequisites.js';
import { startSystem, systemFromEnv } from './system.js';
import { operatorTokenFile, operatorTokenFor } from './tokens.js';

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

const adminToken = operatorTokenFor(name);
const system = await startSystem({
  postgresUrl,
  redisUrl,
  portOffset,
  name,
  replicas,
  restartOnExit: true,
  console: true,
  env: { ADMIN_TOKEN: adminToken },
});
console.log(`
idem is running${name ? ` as system "${name}" (databases *_${name}, queue prefix ${system.queuePrefix})` : ''}:
  console        ${system.urls.console}   (every delivery of an order, fault switches, the checker)
  orders         ${system.urls.orders}   (POST /orders, GET /orders/:id)
  inventory      ${system.urls.inventory}   (GET /stock/:sku)
  payments       ${system.urls.payments}   (GET /payments?orderId=)
  notifications  ${system.urls.notifications}   (GET /emails?orderId=)
  stripe-sim     ${system.urls.stripe}
  smtp-sink      ${system.urls.smtp}, mail API ${system.urls.mail}/api/v1/messages
operator token   ${process.env.ADMIN_TOKEN ? 'ADMIN_TOKEN, as given' : `${adminToken}  (generated; saved in ${operatorTokenFile(name)}, where pnpm demo reads it; the console has it)`}
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
