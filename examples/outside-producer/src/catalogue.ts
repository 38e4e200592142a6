// The library's events: what it publishes, with the schema of each body and who consumes it.
// The consumers' project (examples/outside-consumer) declares the same catalogue: in a real
// system both would import it from one package of contracts the producer owns.
import { defineCatalogue } from '@idem/contracts';
import { z } from 'zod';

export const library = defineCatalogue({
  'library.book-lent.v1': {
    producer: 'library',
    body: z.object({
      loanId: z.uuid(),
      bookId: z.string().min(1),
      memberId: z.string().min(1),
      feeCents: z.number().int().nonnegative(),
    }),
    consumers: ['billing.book-lent.v1', 'reminders.book-lent.v1'],
  },
});

/** The catalogue's contracts, as the generic types take them. */
export type Library = typeof library.contracts;
