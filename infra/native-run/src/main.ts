// `pnpm start`: the whole system, natively. Ctrl-C stops everything.
import { startSystem } from './system.js';

const system = await startSystem({ portOffset: Number(process.env.IDEM_PORT_OFFSET ?? 0) });
console.log(`
idem is running:
  orders         ${system.urls.orders}   (POST /orders, GET /orders/:id)
  inventory      ${system.urls.inventory}   (GET /stock/:sku)
  payments       ${system.urls.payments}   (GET /payments?orderId=)
  notifications  ${system.urls.notifications}   (GET /emails?orderId=)
  stripe-sim     ${system.urls.stripe}
  smtp-sink      ${system.urls.smtp}, mail API ${system.urls.mail}/api/v1/messages
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
