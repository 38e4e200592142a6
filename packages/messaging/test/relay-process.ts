// An outbox relay in its own process, so a test can SIGKILL it for real.
import { PrismaPg } from '@prisma/adapter-pg';
import { faultsFromEnv } from '@idem/faults';
import { createRelay } from '@idem/outbox';
import { PrismaClient } from '@idem/testkit';
import { createPublisher } from '../src/index.js';
import { shop } from '@idem/shop';

const db = new PrismaClient({ adapter: new PrismaPg({ connectionString: process.env.DATABASE_URL! }) });
const publisher = createPublisher({ catalogue: shop, prefix: process.env.IDEM_PREFIX! });
const relay = createRelay({ db, publish: (envelopes) => publisher.publish(envelopes), faults: faultsFromEnv() });
relay.start();
console.log('ready');
