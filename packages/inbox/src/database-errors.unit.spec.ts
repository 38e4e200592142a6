import { describe, expect, it } from 'vitest';
import { classifyFailure, isProcessedMessageConflict } from './database-errors.js';

/** The shape Prisma 7 gives a failed query through the PrismaPg driver adapter. */
function prismaError(code: string, sqlState: string, constraint?: string) {
  return Object.assign(new Error(`Invalid invocation:\n\nQuery failed`), {
    code,
    meta: {
      driverAdapterError: {
        name: 'DriverAdapterError',
        cause: {
          originalCode: sqlState,
          originalMessage: `violates constraint "${constraint}"`,
          ...(constraint ? { constraint: { index: constraint } } : {}),
        },
      },
    },
  });
}

describe('isProcessedMessageConflict', () => {
  it('is true only for a unique violation of processed_messages_pkey from Prisma', () => {
    expect(isProcessedMessageConflict(prismaError('P2002', '23505', 'processed_messages_pkey'))).toBe(true);
    expect(isProcessedMessageConflict(prismaError('P2010', '23505', 'processed_messages_pkey'))).toBe(true);
  });

  it('is false for a unique violation on any other constraint, a foreign key, or a timeout', () => {
    expect(isProcessedMessageConflict(prismaError('P2002', '23505', 'reservations_pkey'))).toBe(false);
    expect(isProcessedMessageConflict(prismaError('P2003', '23503', 'processed_messages_pkey'))).toBe(false);
    expect(isProcessedMessageConflict(Object.assign(new Error('timeout'), { code: 'P2028' }))).toBe(false);
    expect(isProcessedMessageConflict(new Error('processed_messages_pkey'))).toBe(false);
  });
});

describe('classifyFailure', () => {
  it.each([
    ['a lost connection', prismaError('P2010', '57P01'), 'transient_failure', 'database_unavailable'],
    ['a serialization conflict', prismaError('P2034', '40001'), 'transient_failure', 'transaction_conflict'],
    [
      'a business unique key race',
      prismaError('P2002', '23505', 'reservations_pkey'),
      'transient_failure',
      'unique_violation',
    ],
    ['a foreign key violation', prismaError('P2003', '23503', 'x_fkey'), 'permanent_failure', 'constraint_violation'],
    ['a NUL character in text (class 22)', prismaError('P2010', '22021'), 'permanent_failure', 'invalid_data'],
    ['a number out of range (class 22)', prismaError('P2010', '22003'), 'permanent_failure', 'invalid_data'],
    [
      'an expired transaction',
      Object.assign(new Error('expired'), { code: 'P2028' }),
      'transient_failure',
      'database_unavailable',
    ],
    [
      'a connection cut under a query',
      new Error('Connection terminated unexpectedly'),
      'transient_failure',
      'database_unavailable',
    ],
    ['anything unrecognised', new TypeError('x is undefined'), 'transient_failure', 'unexpected_error'],
  ])('classifies %s', (_name, error, outcome, code) => {
    expect(classifyFailure(error)).toMatchObject({ outcome, code });
  });
});
