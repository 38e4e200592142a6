/** Where the transport connects is said, never assumed: no guest on `/` in plain text by default. */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { RabbitmqConfigError } from './rabbitmq-config-error.js';
import { deleteTopology, rabbitmq } from './transport.js';

describe('the RabbitMQ URL', () => {
  let saved: string | undefined;
  beforeEach(() => {
    saved = process.env.RABBITMQ_URL;
    delete process.env.RABBITMQ_URL;
  });
  afterEach(() => {
    if (saved === undefined) delete process.env.RABBITMQ_URL;
    else process.env.RABBITMQ_URL = saved;
  });

  it('is required: with neither url nor RABBITMQ_URL the transport refuses to start, naming the variable', async () => {
    expect(() => rabbitmq({ prefix: 'library' })).toThrow(RabbitmqConfigError);
    expect(() => rabbitmq()).toThrow(/RABBITMQ_URL/);
    await expect(deleteTopology({}, { consumers: ['billing.book-lent.v1'] })).rejects.toThrow(/RABBITMQ_URL/);
  });

  it('is read from RABBITMQ_URL when the options name none', () => {
    process.env.RABBITMQ_URL = 'amqps://billing:secret@rabbit.internal:5671/library';
    expect(rabbitmq().system).toBe('rabbitmq');
  });

  it('names a user: amqplib would log in as guest for one that does not', () => {
    expect(() => rabbitmq({ url: 'amqp://127.0.0.1:5672' })).toThrow(/names no user/);
  });

  it('takes TLS options only with amqps://, never to be ignored on a plain-text connection', () => {
    expect(() => rabbitmq({ url: 'amqp://billing:secret@127.0.0.1:5672', tls: { ca: 'a CA' } })).toThrow(/amqps:/);
    expect(() => rabbitmq({ url: 'http://billing:secret@127.0.0.1:5672' })).toThrow(/amqp:\/\/ or amqps:\/\//);
  });

  it('is never repeated in an error: it may hold a password', () => {
    expect(() => rabbitmq({ url: 'amqp//billing:hunter2@127.0.0.1' })).toThrow(
      expect.objectContaining({ code: 'rabbitmq_config_invalid', message: expect.not.stringContaining('hunter2') }),
    );
  });
});
