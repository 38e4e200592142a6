// `pnpm seed`: the demo catalogue and stock (@idem/console's demo-data.ts) into the native run's
// system (`pnpm start` does it as it starts), or any other through ORDERS_API, INVENTORY_API and
// ADMIN_TOKEN (default: the token `pnpm start` saved).
import { systemFromEnv } from './system.js';
import { savedOperatorToken } from './tokens.js';

const system = systemFromEnv();
process.env.ORDERS_API ??= system.urls.orders;
process.env.INVENTORY_API ??= system.urls.inventory;
const adminToken = savedOperatorToken(system.name);
if (adminToken) process.env.ADMIN_TOKEN = adminToken;
await import('@idem/console/seed');
