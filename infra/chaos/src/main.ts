// `pnpm chaos --orders 500 --kills 20 --seconds 120 [--cancel-share 0.3] [--redis-cluster --broker-kills 2]`: see chaos.ts.
// `pnpm chaos --providers`: 20 orders/s for 2 minutes, SMTP at 300 ms a message and then down for 75 s, Stripe
// down for 60 s while a third of the orders are cancelled; `pnpm chaos --backlog 3000`: see providers.ts.
import { parseArgs } from 'node:util';
import { formatChaosReport, runChaos } from './chaos.js';
import { formatProviderFaultsReport, runNotificationsBacklog, runProviderFaults } from './providers.js';

const { values } = parseArgs({
  options: {
    orders: { type: 'string', default: '200' },
    kills: { type: 'string', default: '10' },
    seconds: { type: 'string', default: '60' },
    drain: { type: 'string', default: '120' },
    replicas: { type: 'string', default: '2' },
    pauses: { type: 'string', default: '2' },
    'postgres-restarts': { type: 'string', default: '1' },
    'redis-stalls': { type: 'string', default: '2' },
    'redis-cluster': { type: 'boolean', default: false },
    'broker-kills': { type: 'string', default: '1' },
    'cancel-share': { type: 'string', default: '0.3' },
    providers: { type: 'boolean', default: false },
    backlog: { type: 'string' },
  },
});
if (values.providers || values.backlog) {
  const report = values.providers
    ? await runProviderFaults({
        ordersPerSecond: 20,
        seconds: 120,
        smtpSlowMs: 300,
        smtpDown: { at: 30, for: 75 },
        stripeDown: { at: 20, for: 60 },
        cancelShare: 0.33,
        drainSeconds: 900,
      })
    : await runNotificationsBacklog({ orders: Number(values.backlog), ordersPerSecond: 20, drainSeconds: 900 });
  console.log(formatProviderFaultsReport(report));
  process.exit(report.ok ? 0 : 1);
}
const report = await runChaos({
  orders: Number(values.orders),
  kills: Number(values.kills),
  seconds: Number(values.seconds),
  drainSeconds: Number(values.drain),
  replicas: Number(values.replicas),
  pauses: Number(values.pauses),
  postgresRestarts: Number(values['postgres-restarts']),
  redisStalls: Number(values['redis-stalls']),
  redisCluster: values['redis-cluster'],
  brokerKills: Number(values['broker-kills']),
  cancelShare: Number(values['cancel-share']),
});
console.log(formatChaosReport(report));
process.exit(report.ok ? 0 : 1);
