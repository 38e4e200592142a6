// A lesson's consumer in a process of its own, so a crash switch can SIGKILL it for real; the
// wrong way when IDEM_LESSON_MISTAKE names a mistake. Its business change takes one unit of the
// lesson's stock row: visibly wrong when applied twice, visibly missing when lost.
import { faultsFromEnv } from '@idem/faults';
import { createInbox } from '@idem/inbox';
import { startConsumer } from '@idem/messaging';
import { PrismaClient } from '@idem/testkit';
import { PrismaPg } from '@prisma/adapter-pg';
import { LESSON_CONSUMER, LESSON_POLICY, takeOneUnit } from './effect.js';
import { MISTAKES, wrongWay, type Mistake } from './wrong-ways.js';
import { shop } from '@idem/shop';

const faults = faultsFromEnv();
const db = new PrismaClient({ adapter: new PrismaPg({ connectionString: process.env.DATABASE_URL! }) });
const rightWay = createInbox({ db, faults });
const mistake = MISTAKES.find((name: Mistake) => name === process.env.IDEM_LESSON_MISTAKE);
const running = startConsumer({
  catalogue: shop,
  consumer: LESSON_CONSUMER,
  ...(mistake ? wrongWay(mistake, { db, faults, rightWay }) : { inbox: rightWay, faults }),
  handler: takeOneUnit,
  prefix: process.env.IDEM_PREFIX!,
  policy: LESSON_POLICY,
  lockDurationMs: 1000,
  stalledIntervalMs: 300,
  onDelivery: (report) => console.log(`delivery ${report.outcome.outcome}`),
});
await running.worker.waitUntilReady();
console.log('ready');
