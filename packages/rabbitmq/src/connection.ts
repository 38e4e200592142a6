import type { ConnectionOptions } from 'node:tls';
import { connect, type ChannelModel } from 'amqplib';
import { RabbitmqConfigError } from './rabbitmq-config-error.js';

/** Where the transport connects: its URL (user, password, host, virtual host), and for amqps:// the TLS options. */
export interface Endpoint {
  readonly url: string;
  readonly tls: ConnectionOptions | undefined;
}

/**
 * The endpoint the options name, refused when they name none: no guest on `/` in plain text by
 * default (amqplib itself logs in as guest when a URL names no user, so one that names none is
 * refused too), and no TLS options on an amqp:// URL, which would ignore them and go in plain text.
 * Every connection asks for a heartbeat of `heartbeatSeconds` unless its URL asks one.
 */
export function endpointOf(options: {
  readonly url?: string;
  readonly tls?: ConnectionOptions;
  readonly heartbeatSeconds?: number;
}): Endpoint {
  const given = options.url ?? process.env.RABBITMQ_URL;
  if (!given)
    throw new RabbitmqConfigError(
      'No RabbitMQ URL: pass rabbitmq({ url }) or set RABBITMQ_URL ' +
        '(amqps://<user>:<password>@<host>:5671/<vhost>, each service its own user); there is no default',
    );
  let parsed: URL;
  try {
    parsed = new URL(given);
  } catch (cause) {
    // Not the text itself: it may hold a password.
    throw new RabbitmqConfigError('The RabbitMQ URL (url, or RABBITMQ_URL) is not a URL', { cause });
  }
  if (parsed.protocol !== 'amqp:' && parsed.protocol !== 'amqps:')
    throw new RabbitmqConfigError(`The RabbitMQ URL is ${parsed.protocol}//…: amqp:// or amqps:// (TLS) only`);
  if (!parsed.username)
    throw new RabbitmqConfigError(
      'The RabbitMQ URL names no user, and amqplib would log in as guest: name the service’s own user in it',
    );
  if (options.tls && parsed.protocol !== 'amqps:')
    throw new RabbitmqConfigError('TLS options for an amqp:// URL, which connects in plain text: use amqps://');
  if (!parsed.searchParams.has('heartbeat'))
    parsed.searchParams.set('heartbeat', String(options.heartbeatSeconds ?? 10));
  return { url: parsed.toString(), tls: options.tls };
}

/** Opens a connection to the endpoint, TLS options included; one not open within `timeoutMs` fails. */
export const openConnection = (endpoint: Endpoint, timeoutMs?: number): Promise<ChannelModel> =>
  connect(endpoint.url, { ...endpoint.tls, ...(timeoutMs === undefined ? {} : { timeout: timeoutMs }) });
