/**
 * What the conformance suite runs on a transport: a catalogue invented here (a library's loans and
 * their fees, not idem's shop), a consumer that charges one fee per loan in the inbox's transaction,
 * and each transport made the same way but for its one line.
 */
import { defineCatalogue } from '@idem/contracts';
import type { SqlClient } from '@idem/database';
import { bullmq } from '@idem/messaging';
import { rabbitmq } from '@idem/rabbitmq';
import { processed, transientFailure, type MessageHandler } from '@idem/inbox';
import { testEnvelope } from '@idem/testing';
import { rabbitmqUrl } from '@idem/testkit';
import { defaultDeliveryPolicy, type Transport } from '@idem/transport';
import { z } from 'zod';

export const catalogue = defineCatalogue({
  'library.book-lent.v1': {
    producer: 'library',
    body: z.object({ loanId: z.uuid(), isbn: z.string().min(10), days: z.number().int().positive() }),
    consumers: ['billing.book-lent.v1'],
  },
});
export const CONSUMER = 'billing.book-lent.v1';

/** A loan of a book, as the library would publish it. */
export const bookLent = (isbn = '9780262033848') =>
  testEnvelope(catalogue, 'library.book-lent.v1', { loanId: crypto.randomUUID(), isbn, days: 21 });
export type BookLent = Awaited<ReturnType<typeof bookLent>>;

/** Fast retries, and nothing kept at the broker after delivery: a copy really reaches the inbox. */
export const policy = { ...defaultDeliveryPolicy, attempts: 3, backoffDelayMs: 50, keepCompletedMs: 0 };

export const TRANSPORTS = ['bullmq', 'rabbitmq'] as const;
export type TransportName = (typeof TRANSPORTS)[number];

/** The one line that differs: the transport, under a prefix of the test's own. */
export const transportOf = (name: TransportName, prefix: string): Transport =>
  name === 'bullmq'
    ? bullmq({ prefix, policy, lockDurationMs: 1000, stalledIntervalMs: 300 })
    : rabbitmq({ url: rabbitmqUrl, prefix, policy });

/**
 * Charges a fee per loan in the inbox's transaction. A book whose ISBN is in `failing` (a table
 * the test fills) fails for now: a transient failure, retried.
 */
export const chargeFee: MessageHandler<SqlClient, BookLent> = async (message, tx) => {
  const failing = await tx.$queryRaw<{ n: number }[]>`
    SELECT count(*)::int AS n FROM failing_books WHERE isbn = ${message.body.isbn}`;
  if (failing[0]!.n > 0) return transientFailure('book_unavailable', `${message.body.isbn} is failing for now`);
  await tx.$executeRaw`INSERT INTO fees (loan_id, cents) VALUES (${message.body.loanId}::uuid, 150)`;
  return processed;
};

export const TABLES = `
  CREATE TABLE fees (loan_id uuid NOT NULL, cents int NOT NULL);
  CREATE TABLE failing_books (isbn text PRIMARY KEY);`;
