// `pnpm seed`: the demo catalogue and stock (@idem/console's demo-data.ts) into the native run's
// system (`pnpm start` does it as it starts), or any other through ORDERS_API, INVENTORY_API,
// ORDERS_ADMIN_TOKEN and INVENTORY_ADMIN_TOKEN (default: the tokens `pnpm start` saved).
import { systemFromEnv } from './system.js';
import { operatorTokenVariable, savedOperatorTokens } from './tokens.js';

const system = systemFromEnv();
process.env.ORDERS_API ??= system.urls.orders;
process.env.INVENTORY_API ??= system.urls.inventory;
const saved = savedOperatorTokens(system.name);
for (const service of ['orders', 'inventory'] as const) {
  const token = saved[service];
  if (token) process.env[operatorTokenVariable(service)] = token;
}
await import('@idem/console/seed');
