import { describe, expect, it } from 'vitest';
import { smtpFailureOf } from './smtp.js';

/** An error as nodemailer makes them: its code, message, and where it has one the server's reply and the timeout's kind. */
const failure = (fields: { code: string; message: string; responseCode?: number; timeoutType?: string }) =>
  Object.assign(new Error(fields.message), fields);

describe('a failed send', () => {
  it('is unconfirmed when the connection dropped or went silent mid-session with no reply: a 250 may have been lost', () => {
    for (const error of [
      failure({ code: 'ECONNECTION', message: 'Connection closed unexpectedly' }),
      failure({ code: 'ESOCKET', message: 'read ECONNRESET' }),
      failure({ code: 'ETIMEDOUT', message: 'Timeout', timeoutType: 'socket' }),
    ])
      expect(smtpFailureOf(error), error.message).toMatchObject({ responseCode: 0, unconfirmed: true });
  });

  it('is confirmed not taken when the server answered, or no connection was ever made', () => {
    for (const error of [
      failure({ code: 'EENVELOPE', message: 'Temporary failure', responseCode: 451 }),
      failure({ code: 'ESOCKET', message: 'connect ECONNREFUSED 127.0.0.1:1025' }),
      failure({ code: 'ETIMEDOUT', message: 'Greeting never received', timeoutType: 'greeting' }),
      failure({ code: 'ETIMEDOUT', message: 'Connection timeout', timeoutType: 'connection' }),
    ])
      expect(smtpFailureOf(error), error.message).toMatchObject({ unconfirmed: false });
  });
});
