// The reminders consumer checked as a test would check it, with @idem/testing: a test envelope
// of the library's catalogue, delivered through a real inbox the ways a broker can — rolled
// back after the handler ran, twice at once, again, with another body — and the reminders
// counted after each. No broker needed: it throws an IdempotencyViolation if one effect became two.
import type { MessageOf } from '@idem/contracts';
import { fromNodePostgres, migrate, type SqlClient } from '@idem/database';
import { inboxTables, processed, type MessageHandler } from '@idem/inbox';
import { checkIdempotentConsumer, testEnvelope } from '@idem/testing';
import pg from 'pg';
import { library, type Library } from './catalogue.js';

const CONSUMER = 'reminders.book-lent.v1';
const databaseUrl = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/billing';
await migrate({ databaseUrl, migrationsDir: 'prisma/migrations', include: [inboxTables] });
const pool = new pg.Pool({ connectionString: databaseUrl });

const scheduleReminder: MessageHandler<SqlClient, MessageOf<Library, typeof CONSUMER>> = async (message, tx) => {
  const { loanId, memberId } = message.body;
  const due = new Date(Date.now() + 14 * 24 * 3_600_000);
  await tx.$executeRaw`INSERT INTO reminders (loan_id, member_id, due_at) VALUES (${loanId}::uuid, ${memberId}, ${due})`;
  return processed;
};

const message = await testEnvelope(library, 'library.book-lent.v1', {
  loanId: crypto.randomUUID(),
  bookId: 'book-7',
  memberId: 'ada',
  feeCents: 150,
});
const deliveries = await checkIdempotentConsumer({
  db: fromNodePostgres(pool),
  consumer: CONSUMER,
  message,
  handler: scheduleReminder,
  effects: async () =>
    (await pool.query('SELECT count(*)::int AS n FROM reminders WHERE loan_id = $1', [message.body.loanId])).rows[0].n,
  conflictingBody: { ...message.body, memberId: 'mallory' },
});
console.log(JSON.stringify({ checked: deliveries.map((d) => `${d.outcome}:${String(d.effects)}`) }));
await pool.end();
