// The conformance suite's consumer in a process of its own, so a test can kill it for real
// (IDEM_FAULTS: crash-after-commit). TRANSPORT names its transport, IDEM_PREFIX its names.
import { fromNodePostgres } from '@idem/database';
import { faultsFromEnv } from '@idem/faults';
import { createInbox } from '@idem/inbox';
import pg from 'pg';
import { catalogue, chargeFee, CONSUMER, transportOf, type TransportName } from './system.js';

const faults = faultsFromEnv();
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL!, max: 8 });
const transport = transportOf(process.env.TRANSPORT as TransportName, process.env.IDEM_PREFIX!);
const consumer = transport.startConsumer({
  catalogue,
  consumer: CONSUMER,
  inbox: createInbox({ db: fromNodePostgres(pool), faults }),
  handler: chargeFee,
  faults,
  onDelivery: (report) => console.log(`delivery ${report.messageId} ${report.outcome.outcome}`),
});
await consumer.ready;
console.log('ready');
