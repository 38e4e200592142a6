// `pnpm chaos --orders 500 --kills 20 --seconds 120 [--cancel-share 0.3] [--redis-cluster --broker-kills 2]`: see chaos.ts.
// `pnpm chaos --providers [--full]`: two runs, see providers.ts. First 20 orders/s for 2 minutes, a third
// cancelled, the SMTP link slow (150 ms a chunk each way) and then a black hole for 45 s (replies on their
// way lost: the lookup's case) and down for 20 s, Stripe down for 60 s; then a 60 s notifications pause at
// 20 orders/s, with how long it took to drain. `--full` is the outside check's scenario: 900 orders at 10/s,
// the link at 300 ms a chunk and then a black hole, and a 3-minute pause at 20 orders/s drained within 3
// minutes. `pnpm chaos --backlog 3000`: see providers.ts.
import { parseArgs } from 'node:util';
import { formatChaosReport, runChaos } from './chaos.js';
import {
  formatProviderFaultsReport,
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
  const faults = await runProviderFaults(
    values.full
      ? {
          ordersPerSecond: 10,
          seconds: 90,
          smtpSlowMs: 0,
          smtpLinkSlowMs: 300,
          smtpBlackHole: { at: 30, for: 60 },
          stripeDown: { at: 20, for: 60 },
          cancelShare: 0.33,
          drainSeconds: 900,
        }
      : {
          ordersPerSecond: 20,
          seconds: 120,
          smtpSlowMs: 0,
          smtpLinkSlowMs: 150,
          smtpBlackHole: { at: 30, for: 45 },
          smtpDown: { at: 80, for: 20 },
          stripeDown: { at: 20, for: 60 },
          cancelShare: 0.33,
          drainSeconds: 900,
        },
  );
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
