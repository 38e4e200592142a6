// An email dispatcher in its own process, so a test can SIGKILL it for real (fault switches from the environment).
import { faultsFromEnv } from '@idem/faults';
import { createLogger } from '@idem/runtime';
import { connectDatabase } from '../src/db.js';
import { createDispatcher } from '../src/workers/dispatcher.js';

createDispatcher({
  db: connectDatabase(process.env.DATABASE_URL!),
  smtpUrl: process.env.SMTP_URL!,
  from: 'shop@idem.local',
  log: createLogger('notifications', 'silent'),
  faults: faultsFromEnv(),
  pollIntervalMs: 50,
  batchSize: 1,
  smtpConnections: 1,
  leaseMs: 2000,
  smtpTimeoutMs: 500,
}).start();
