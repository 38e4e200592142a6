// A writer that hands its committed events to the broker (the outbox's handoff) in its own
// process, so a test can SIGKILL it for real between publishing and marking.
import { PrismaPg } from '@prisma/adapter-pg';
import { faultsFromEnv } from '@idem/faults';
import { runningAfterCommit } from '@idem/database';
import { handoffFor } from '@idem/outbox';
import { PrismaClient } from '@idem/testkit';
import { shop } from '@idem/shop';
import { createPublisher } from '../src/index.js';
import { writeOrders } from './fixtures.js';

const db = runningAfterCommit(
  new PrismaClient({ adapter: new PrismaPg({ connectionString: process.env.DATABASE_URL! }) }),
);
const publisher = createPublisher({ catalogue: shop, prefix: process.env.IDEM_PREFIX! });
handoffFor(db).start({
  publish: (envelopes) => publisher.publish(envelopes),
  sweepAfterMs: Number(process.env.SWEEP_AFTER_MS),
  faults: faultsFromEnv(),
});
console.log('ready');
await writeOrders(db, Number(process.env.ORDERS));
