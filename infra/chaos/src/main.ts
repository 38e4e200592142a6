// `pnpm chaos --orders 500 --kills 20 --seconds 120 [--cancel-share 0.3] [--redis-cluster --broker-kills 2]`: see chaos.ts.
import { parseArgs } from 'node:util';
import { formatChaosReport, runChaos } from './chaos.js';

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
  },
});
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
