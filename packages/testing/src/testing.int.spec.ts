/**
 * @idem/testing on a catalogue that is not idem's (a library's loans and their fees), on a real
 * PostgreSQL through plain node-postgres: the envelopes it builds, and the consumer check —
 * passing for a consumer that writes in the inbox's transaction, failing, with the delivery
 * named, for two that do not.
 */
import { fromNodePostgres, type SqlClient } from '@idem/database';
import { processed, type MessageHandler } from '@idem/inbox';
import { bookLent, catalogue, chargeFee, type BookLent } from '../test/library.js';
import { createTestDatabase, type TestDatabase } from '@idem/testkit';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { checkIdempotentConsumer, IdempotencyViolation, testEnvelope } from './index.js';

let database: TestDatabase;
let pool: pg.Pool;
beforeAll(async () => {
  database = await createTestDatabase('testing_package');
  pool = new pg.Pool({ connectionString: database.url, max: 4 });
  await pool.query('CREATE TABLE fees (loan_id uuid NOT NULL, cents int NOT NULL)');
});
afterAll(async () => {
  await pool?.end();
  await database?.drop();
});
beforeEach(async () => {
  await pool.query('TRUNCATE fees, processed_messages');
});

const db = () => fromNodePostgres(pool);
const fees = async () => (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM fees')).rows[0]!.n;

describe('testEnvelope', () => {
  it('builds a valid envelope of any catalogue: a UUID v7 id, its producer, the body as the schema gives it', async () => {
    const at = new Date('2026-12-05T10:00:00Z');
    const message = await testEnvelope(
      catalogue,
      'library.book-lent.v1',
      { loanId: '0193a0d2-7f3c-7000-8000-000000000001', isbn: '9780262033848' } as never, // days left to its default
      { at, aggregateVersion: 3 },
    );
    expect(message).toMatchObject({
      type: 'library.book-lent.v1',
      producer: 'library',
      occurredAt: at.toISOString(),
      aggregateVersion: 3,
      causationId: null,
      body: { days: 21 },
    });
    const ms = at.getTime().toString(16).padStart(12, '0'); // a UUID v7 opens with its time
    expect(message.messageId).toMatch(new RegExp(`^${ms.slice(0, 8)}-${ms.slice(8)}-7`));
  });

  it('refuses a body its contract does not allow, naming the field', async () => {
    await expect(bookLent('123')).rejects.toThrow(/not a valid library\.book-lent\.v1: .*body\.isbn/);
  });
});

describe('checkIdempotentConsumer', () => {
  it('passes a consumer that writes in the inbox transaction: one fee, whatever the broker does', async () => {
    const message = await bookLent();
    const deliveries = await checkIdempotentConsumer({
      db: db(),
      consumer: 'billing.book-lent.v1',
      message,
      handler: chargeFee,
      effects: fees,
      conflictingBody: { ...message.body, days: 7 },
    });
    expect(deliveries.map((d) => [d.outcome, d.effects])).toEqual([
      ['transient_failure', 0],
      ['duplicate', 1],
      ['processed', 1],
      ['duplicate', 1],
      ['conflicting_duplicate', 1],
    ]);
    expect(await fees()).toBe(1);
  });

  it('fails a consumer that writes outside the transaction, at the delivery that was rolled back', async () => {
    const outside: MessageHandler<SqlClient, BookLent> = async (message) => {
      await pool.query('INSERT INTO fees (loan_id, cents) VALUES ($1, 150)', [message.body.loanId]);
      return processed;
    };
    const check = checkIdempotentConsumer({
      db: db(),
      consumer: 'billing.book-lent.v1',
      message: await bookLent(),
      handler: outside,
      effects: fees,
    });
    await expect(check).rejects.toThrow(IdempotencyViolation);
    await expect(check).rejects.toThrow(/a delivery rolled back after its handler ran: changed the effect from 0 to 1/);
  });

  it('fails a consumer whose record does not survive its transaction, at the two deliveries at once', async () => {
    // A handler that deletes what the inbox wrote: as if there were no inbox, each copy charges.
    const forgetting: MessageHandler<SqlClient, BookLent> = async (message, tx) => {
      await tx.$executeRaw`INSERT INTO fees (loan_id, cents) VALUES (${message.body.loanId}::uuid, 150)`;
      await tx.$executeRaw`DELETE FROM processed_messages WHERE message_id = ${message.messageId}::uuid`;
      return processed;
    };
    const check = checkIdempotentConsumer({
      db: db(),
      consumer: 'billing.book-lent.v1',
      message: await bookLent(),
      handler: forgetting,
      effects: fees,
    });
    await expect(check).rejects.toThrow(/two deliveries at the same moment: ended (?!.*and duplicate,)/);
  });
});
