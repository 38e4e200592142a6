// A service outside the idem repository that produces an event of its own with the published
// packages and plain node-postgres (no Prisma): the loan and its `library.book-lent.v1` event
// commit together (the transactional outbox), and the relay then publishes the event to every
// consumer that subscribed, on BullMQ or RabbitMQ (transport.ts). A crash between the commit and the publication publishes it later; one
// after the publication publishes it again, which the consumers' inboxes absorb.
import { randomUUID } from 'node:crypto';
import { fromNodePostgres, migrate } from '@idem/database';
import { createRelay, enqueue, outboxTables } from '@idem/outbox';
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

// The relay: claims what the outbox holds, publishes it to every subscriber, marks it.
const publisher = transport.createPublisher({ catalogue: library });
const relay = createRelay({ db, publish: (envelopes) => publisher.publish(envelopes) });
let published = 0;
for (let batch = await relay.publishBatch(); batch.published > 0; batch = await relay.publishBatch()) {
  published += batch.published;
}
const [{ messageId }] = await db.$queryRaw<{ messageId: string }[]>`
  SELECT message_id::text AS "messageId" FROM outbox_messages WHERE published_at IS NOT NULL`;
console.log(JSON.stringify({ loanId, messageId, published }));

await publisher.close();
await db.pool.end();
