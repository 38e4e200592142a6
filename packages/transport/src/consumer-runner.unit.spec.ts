import { permanentFailure, transientFailure } from '@idem/inbox';
import { describe, expect, it } from 'vitest';
import { deadLetterVerdict } from './consumer-runner.js';

describe('deadLetterVerdict', () => {
  it('makes a permanent failure a dead letter at once, a transient one only on its last attempt', () => {
    const refused = permanentFailure('invalid_body', 'lines: too many');
    expect(deadLetterVerdict(refused, { attempt: 1, lastAttempt: false })).toEqual({
      code: 'invalid_body',
      reason: 'lines: too many',
    });
    const busy = transientFailure('database_unavailable', 'connection refused');
    expect(deadLetterVerdict(busy, { attempt: 3, lastAttempt: false })).toBeUndefined();
    expect(deadLetterVerdict(busy, { attempt: 8, lastAttempt: true })).toEqual({
      code: 'retries_exhausted',
      reason: 'still failing after 8 attempts: database_unavailable: connection refused',
    });
  });

  it('never makes a settled delivery a dead letter', () => {
    for (const outcome of ['processed', 'duplicate'] as const)
      expect(deadLetterVerdict({ outcome }, { attempt: 8, lastAttempt: true })).toBeUndefined();
  });
});
