// A lesson's consumer in a process of its own, so a crash switch can SIGKILL it for real.
// Its business change takes one unit of the lesson's stock row: visibly wrong when applied
// twice, visibly missing when lost.
import { faultsFromEnv } from '@idem/faults';
import { createInbox } from '@idem/inbox';
import { startConsumer } from '@idem/messaging';
import { PrismaClient } from '@idem/testkit';
import { PrismaPg } from '@prisma/adapter-pg';
import { LESSON_CONSUMER, takeOneUnit } from './effect.js';

const faults = faultsFromEnv();
const db = new PrismaClient({ adapter: new PrismaPg({ connectionString: process.env.DATABASE_URL! }) });
const running = startConsumer({
  consumer: LESSON_CONSUMER,
  inbox: createInbox({ db, faults }),
  handler: takeOneUnit,
  prefix: process.env.IDEM_PREFIX!,
  lockDurationMs: 1000,
  stalledIntervalMs: 300,
  faults,
  onDelivery: (report) => console.log(`delivery ${report.outcome.outcome}`),
});
await running.worker.waitUntilReady();
console.log('ready');
