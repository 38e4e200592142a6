// A consumer instance in its own process, so a test can SIGKILL it for real.
import { PrismaPg } from '@prisma/adapter-pg';
import { faultsFromEnv } from '@idem/faults';
import { createInbox } from '@idem/inbox';
import { PrismaClient } from '@idem/testkit';
import { startConsumer } from '../src/index.js';
import { KEEP_NOTHING, reserveOneUnit } from './fixtures.js';
import { shop } from '@idem/shop';

const consumer = 'inventory.order-placed.v1';
const faults = faultsFromEnv();
const db = new PrismaClient({ adapter: new PrismaPg({ connectionString: process.env.DATABASE_URL! }) });
const running = startConsumer({
  catalogue: shop,
  consumer,
  inbox: createInbox({ db, faults }),
  handler: reserveOneUnit(consumer),
  prefix: process.env.IDEM_PREFIX!,
  lockDurationMs: 1000,
  // BullMQ runs one stalled-job check per interval across all instances (a shared Redis key),
  // so every instance of a consumer must use the same short interval in tests.
  stalledIntervalMs: 300,
  policy: KEEP_NOTHING,
  faults,
  onDelivery: (report) => console.log(`delivery ${report.messageId} ${report.outcome.outcome}`),
});
await running.worker.waitUntilReady();
console.log('ready');
