import { describe, expect, it } from 'vitest';
import { afterFailedSend } from './email-work-item.js';

const policy = { maxAttempts: 8, retryDelayMs: 1000 };

describe('the email work item after a failed send', () => {
  it('is retried after a temporary refusal, later each time, and dies on its last attempt', () => {
    expect(afterFailedSend({ attempts: 1 }, { ...policy, responseCode: 421 })).toEqual({
      status: 'pending',
      retryInMs: 1000,
    });
    expect(afterFailedSend({ attempts: 3 }, { ...policy, responseCode: 0 })).toEqual({
      status: 'pending',
      retryInMs: 4000,
    });
    expect(afterFailedSend({ attempts: 8 }, { ...policy, responseCode: 0 }).status).toBe('parked');
    expect(afterFailedSend({ attempts: 30 }, { ...policy, maxAttempts: 50, responseCode: 0 }).retryInMs).toBe(600_000);
  });

  it('dies at once when the server refuses it for good (5xx)', () => {
    expect(afterFailedSend({ attempts: 1 }, { ...policy, responseCode: 550 }).status).toBe('parked');
  });
});
