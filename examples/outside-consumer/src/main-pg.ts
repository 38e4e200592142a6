// The same consumer shape with plain node-postgres and no Prisma, run by the published composition:
// reminders schedules one reminder per loan. `fromNodePostgres` gives the inbox a transaction on a
// pg pool; the handler writes with the same transaction (`tx.$executeRaw`, or `tx.client` for any
// pg query). `startIdem` runs the consumer through the inbox, the retention of its records (from
// the transport's policy) and the shutdown in order.
import { fromNodePostgres, migrate } from '@idem/database';
import { inboxTables, processed } from '@idem/inbox';
import type { DeliveryReport } from '@idem/transport';
import type { MessageOf } from '@idem/contracts';
import { startIdem } from '@idem/service';
import pg from 'pg';
import { library, type Library } from './catalogue.js';
import { transport } from './transport.js';

const CONSUMER = 'reminders.book-lent.v1';
const databaseUrl = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/billing';

await migrate({ databaseUrl, migrationsDir: 'prisma/migrations', include: [inboxTables] });
const db = fromNodePostgres(new pg.Pool({ connectionString: databaseUrl }));

const settled: DeliveryReport[] = [];
let first: MessageOf<Library, typeof CONSUMER> | undefined;
const idem = startIdem({
  db,
  catalogue: library,
  transport,
  consumers: {
    [CONSUMER]: async (message, tx) => {
      first ??= message;
      const { loanId, memberId } = message.body;
      const due = new Date(Date.now() + 14 * 24 * 3_600_000);
      await tx.$executeRaw`INSERT INTO reminders (loan_id, member_id, due_at) VALUES (${loanId}::uuid, ${memberId}, ${due})`;
      return processed;
    },
  },
  onRecorded: (report) => settled.push(report),
});

await until(() => settled.length === 1);
const { publisher } = idem;
const delivered = first!;
await publisher.redeliver(CONSUMER, delivered.messageId, delivered);
await until(() => settled.length === 2);
await publisher.redeliver(CONSUMER, delivered.messageId, {
  ...delivered,
  body: { ...delivered.body, memberId: 'mallory' },
});
await until(() => settled.length === 3);

const [{ reminders }] = await db.$queryRaw<{ reminders: number }[]>`
  SELECT count(*)::int AS reminders FROM reminders WHERE loan_id = ${delivered.body.loanId}::uuid`;
console.log(JSON.stringify({ outcomes: settled.map((report) => report.outcome.outcome), reminders }));

await idem.maintain(); // records are kept for the replay horizon and a day: none goes yet
await idem.stop();
await db.pool.end();

async function until(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('no delivery settled within 30 s: did the producer run?');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
