// A service outside the idem repository that produces an event of its own with the published
// packages and plain node-postgres (no Prisma): the loan and its `library.book-lent.v1` event
// commit together (the transactional outbox), and the relay then publishes the event to every
// consumer that subscribed, on BullMQ or RabbitMQ (transport.ts). A crash between the commit and the publication publishes it later; one
// after the publication publishes it again, which the consumers' inboxes absorb.
import { randomUUID } from 'node:crypto';
import { fromNodePostgres, migrate } from '@idem/database';
import { enqueue, outboxTables } from '@idem/outbox';
import { startIdem } from '@idem/service';
import pg from 'pg';
import { library } from './catalogue.js';
import { transport } from './transport.js';

const databaseUrl = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/library';

// This project's migrations, and the outbox's table applied before them.
await migrate({ databaseUrl, migrationsDir: 'migrations', include: [outboxTables] });
const db = fromNodePostgres(new pg.Pool({ connectionString: databaseUrl }));

// The business change and its event, in one transaction.
const loanId = randomUUID();
const lentAt = new Date();
await db.$transaction(async (tx) => {
  await tx.$executeRaw`
    INSERT INTO loans (id, book_id, member_id, fee_cents, lent_at)
    VALUES (${loanId}::uuid, ${'moby-dick'}, ${'ada'}, ${150}, ${lentAt})`;
  await enqueue(
    tx,
    library,
    {
      type: 'library.book-lent.v1',
      body: { loanId, bookId: 'moby-dick', memberId: 'ada', feeCents: 150 },
      aggregateId: loanId,
      aggregateVersion: 1,
      correlationId: randomUUID(),
      causationId: null,
    },
    lentAt,
  );
});

// The published composition runs the relay (claims what the outbox holds, publishes it to every
// subscriber, marks it), the purge of published rows, and the shutdown in order.
const idem = startIdem({ db, catalogue: library, transport, relay: true });
const messageId = await publishedMessage();
const { outboxDeleted } = await idem.maintain(); // published rows are kept 7 days: none yet
console.log(JSON.stringify({ loanId, messageId, published: 1, outboxDeleted }));

await idem.stop();
await db.pool.end();

async function publishedMessage(): Promise<string> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const [row] = await db.$queryRaw<{ messageId: string }[]>`
      SELECT message_id::text AS "messageId" FROM outbox_messages WHERE published_at IS NOT NULL`;
    if (row) return row.messageId;
    if (Date.now() > deadline) throw new Error('nothing published within 30 s: is the broker up?');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
