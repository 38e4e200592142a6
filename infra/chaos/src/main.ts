// `pnpm chaos --orders 500 --kills 20 --seconds 120 [--cancel-share 0.3] [--redis-cluster --broker-kills 2]`: see chaos.ts.
// `pnpm chaos --providers [--full]`: the scenario `standard` (`--full`: `outsideCheck`) of providers.ts's
// PROVIDER_SCENARIOS, then a notifications pause at 20 orders/s (60 s; `--full`: 3 minutes) and how long it
// took to drain. `pnpm chaos --backlog 3000`: see providers.ts.
import { parseArgs } from 'node:util';
import { formatChaosReport, runChaos } from './chaos.js';
import {
  formatProviderFaultsReport,
  PROVIDER_SCENARIOS,
  runNotificationsBacklog,
  runNotificationsPause,
  runProviderFaults,
} from './providers.js';

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
    full: { type: 'boolean', default: false },
    backlog: { type: 'string' },
  },
});
if (values.providers) {
  const faults = await runProviderFaults(PROVIDER_SCENARIOS[values.full ? 'outsideCheck' : 'standard']);
  console.log(formatProviderFaultsReport(faults));
  const pause = await runNotificationsPause({ ordersPerSecond: 20, pauseSeconds: values.full ? 180 : 60 });
  console.log(`\n${formatProviderFaultsReport(pause)}`);
  process.exit(faults.ok && pause.ok && pause.pause.withinPause ? 0 : 1);
}
if (values.backlog) {
  const report = await runNotificationsBacklog({
    orders: Number(values.backlog),
    ordersPerSecond: 20,
    drainSeconds: 900,
  });
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
