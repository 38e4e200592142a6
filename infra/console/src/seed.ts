// The demo shop, into a system through its operator API, where a SKU has none yet
// (demo-data.ts): compose's one-shot `seed` service runs it, and `pnpm seed` natively.
// ORDERS_API, INVENTORY_API, ORDERS_ADMIN_TOKEN and INVENTORY_ADMIN_TOKEN (each API's own
// operator token). The APIs may still be starting: it asks again for a while.
import { seedDemoShop } from './demo-data.js';

const { ORDERS_API, INVENTORY_API, ORDERS_ADMIN_TOKEN, INVENTORY_ADMIN_TOKEN } = process.env;
if (!ORDERS_API || !INVENTORY_API || !ORDERS_ADMIN_TOKEN || !INVENTORY_ADMIN_TOKEN) {
  throw new Error(
    'set ORDERS_API, INVENTORY_API, ORDERS_ADMIN_TOKEN and INVENTORY_ADMIN_TOKEN: where the demo shop goes, and each API’s operator token',
  );
}
const adminTokens = { orders: ORDERS_ADMIN_TOKEN, inventory: INVENTORY_ADMIN_TOKEN };
const deadline = Date.now() + 120_000;
for (;;) {
  try {
    const added = await seedDemoShop({ orders: ORDERS_API, inventory: INVENTORY_API, adminTokens });
    console.log(JSON.stringify({ service: 'seed', msg: 'demo shop in place', ...added }));
    break;
  } catch (error) {
    if (Date.now() > deadline) throw error;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
  }
}
