// A service outside the idem repository that consumes an event of another service with the
// published packages and Prisma: billing charges a loan's fee. The inbox records each message in
// the transaction that charges it, and the consumer runner settles a delivery (BullMQ's or RabbitMQ's) only after
// that commit. The demo then delivers the same message again, as a broker does after a crash or
// a replay (`duplicate`), and a copy with the same id and another body, as a buggy producer
// would send (`conflicting_duplicate`): one fee either way.
import { migrate } from '@idem/database';
import { createInbox, inboxTables, processed } from '@idem/inbox';
import type { DeliveryReport } from '@idem/transport';
import type { MessageOf } from '@idem/contracts';
import { PrismaPg } from '@prisma/adapter-pg';
import { library, type Library } from './catalogue.js';
import { transport } from './transport.js';
import { PrismaClient } from './generated/prisma/client.js';

const CONSUMER = 'billing.book-lent.v1';
const databaseUrl = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/billing';

// This project's migrations, and the inbox's tables applied before them.
await migrate({ databaseUrl, migrationsDir: 'prisma/migrations', include: [inboxTables] });
const db = new PrismaClient({ adapter: new PrismaPg({ connectionString: databaseUrl }) });

const settled: DeliveryReport[] = [];
let first: MessageOf<Library, typeof CONSUMER> | undefined;
const consumer = transport.startConsumer({
  catalogue: library,
  consumer: CONSUMER,
  inbox: createInbox({ db }),
  // Runs inside the inbox's transaction: the fee and the processed record commit together.
  handler: async (message, tx) => {
    first ??= message;
    const { loanId, memberId, feeCents } = message.body;
    await tx.fee.create({ data: { loanId, memberId, cents: feeCents, chargedAt: new Date() } });
    return processed;
  },
  onRecorded: (report) => settled.push(report),
});

// The producer published the loan's event (examples/outside-producer); it arrives here once...
await until(() => settled.length === 1);
// ... then again, under the same message id; then a copy with the same id and another body.
const publisher = transport.createPublisher({ catalogue: library });
const delivered = first!;
await publisher.redeliver(CONSUMER, delivered.messageId, delivered);
await until(() => settled.length === 2);
const conflicting = { ...delivered, body: { ...delivered.body, feeCents: delivered.body.feeCents * 10 } };
await publisher.redeliver(CONSUMER, delivered.messageId, conflicting);
await until(() => settled.length === 3);

const fees = await db.fee.count({ where: { loanId: delivered.body.loanId } });
console.log(JSON.stringify({ outcomes: settled.map((report) => report.outcome.outcome), fees }));

await consumer.close();
await publisher.close();
await db.$disconnect();

async function until(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('no delivery settled within 30 s: did the producer run?');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
