/**
 * What this package's tests run on: a library's catalogue (not idem's shop), where billing charges a
 * fee per loan and publishes the charge, and audit keeps both; envelopes of it; fast retries.
 */
import { defineCatalogue, newMessageId, type AnyEnvelope } from '@idem/contracts';
import { defaultDeliveryPolicy } from '@idem/transport';
import { z } from 'zod';

export const catalogue = defineCatalogue({
  'library.book-lent.v1': {
    producer: 'library',
    body: z.object({ loanId: z.uuid(), isbn: z.string().min(10) }),
    consumers: ['billing.book-lent.v1', 'audit.book-lent.v1'],
  },
  'billing.fee-charged.v1': {
    producer: 'billing',
    body: z.object({ loanId: z.uuid(), cents: z.number().int() }),
    consumers: ['audit.fee-charged.v1'],
  },
});

/** Three attempts, 50 ms apart and doubling: a message that keeps failing is dead within a second. */
export const policy = { ...defaultDeliveryPolicy, attempts: 3, backoffDelayMs: 50, keepCompletedMs: 0 };

/** A loan, as the library publishes it. */
export function bookLent(): AnyEnvelope {
  const loanId = crypto.randomUUID();
  return {
    messageId: newMessageId(new Date()),
    type: 'library.book-lent.v1',
    producer: 'library',
    occurredAt: new Date().toISOString(),
    correlationId: loanId,
    causationId: null,
    aggregateId: loanId,
    aggregateVersion: 1,
    body: { loanId, isbn: '9780262033848' },
  };
}

/** A fee billing charged for a loan. */
export function feeCharged(): AnyEnvelope {
  const loanId = crypto.randomUUID();
  return { ...bookLent(), type: 'billing.fee-charged.v1', producer: 'billing', body: { loanId, cents: 150 } };
}
