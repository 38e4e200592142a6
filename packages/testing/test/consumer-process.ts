// The fee consumer in a process of its own, on BullMQ through the published composition, so that
// crashAt can kill it for real; its fault switches come from the environment.
import { fromNodePostgres } from '@idem/database';
import { faultsFromEnv } from '@idem/faults';
import { bullmq } from '@idem/messaging';
import { startIdem } from '@idem/service';
import pg from 'pg';
import { catalogue, chargeFee, CONSUMER } from './library.js';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
const idem = startIdem({
  db: fromNodePostgres(pool),
  catalogue,
  // A short lock: the delivery a killed process held comes back within seconds.
  transport: bullmq({
    redisUrl: process.env.REDIS_URL,
    prefix: process.env.IDEM_QUEUE_PREFIX,
    lockDurationMs: 2_000,
    stalledIntervalMs: 500,
  }),
  consumers: { [CONSUMER]: chargeFee },
  faults: faultsFromEnv(),
  onRecorded: (report) => console.log(`${report.outcome.outcome} ${report.messageId}`),
});
await idem.ready;
console.log('ready');
