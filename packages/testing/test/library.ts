// A catalogue that is not idem's (a library's loans and their fees), for the tests of @idem/testing.
import { defineCatalogue } from '@idem/contracts';
import type { SqlClient } from '@idem/database';
import { processed, type MessageHandler } from '@idem/inbox';
import { z } from 'zod';
import { testEnvelope } from '../src/index.js';

export const catalogue = defineCatalogue({
  'library.book-lent.v1': {
    producer: 'library',
    body: z.object({ loanId: z.uuid(), isbn: z.string().min(10), days: z.number().int().positive().default(21) }),
    consumers: ['billing.book-lent.v1'],
  },
});
export const CONSUMER = 'billing.book-lent.v1';
export type BookLent = Awaited<ReturnType<typeof bookLent>>;
export const bookLent = (isbn = '9780262033848') =>
  testEnvelope(catalogue, 'library.book-lent.v1', { loanId: crypto.randomUUID(), isbn, days: 21 });

/** Charges a fee for the loan, in the inbox's transaction: the right way. */
export const chargeFee: MessageHandler<SqlClient, BookLent> = async (message, tx) => {
  await tx.$executeRaw`INSERT INTO fees (loan_id, cents) VALUES (${message.body.loanId}::uuid, 150)`;
  return processed;
};
