import type { AnyEnvelope } from '@idem/contracts';
import { noFaults } from '@idem/faults';
import { acceptedWithin, PUBLISH_TIMEOUT_MS, type Publisher, type PublisherOptions } from '@idem/transport';
import type { Socket } from 'node:net';
import type { ChannelModel, ConfirmChannel } from 'amqplib';
import { openConnection, type Endpoint } from './connection.js';
import { declareExchange, exchangeOf, redeliveryExchangeOf, type Names } from './topology.js';

/** A message as the transport puts it on RabbitMQ: JSON, persistent, under its message id. */
export const propertiesOf = (messageId: string, type: string, headers: Record<string, unknown> = {}) => ({
  persistent: true,
  contentType: 'application/json',
  messageId,
  type,
  headers,
});

/**
 * A publisher on RabbitMQ: each envelope goes to its contract's exchange, whoever is bound to it,
 * on a confirm channel; a publication counts only once RabbitMQ confirmed every message of it
 * (for a quorum queue: written to a majority of its replicas). It needs no list of consumers.
 */
export function createRabbitPublisher(endpoint: Endpoint, names: Names, options: PublisherOptions): Publisher {
  const faults = options.faults ?? noFaults;
  // Each contract's exchange, declared once per connection: publications that meet a declaration
  // under way wait for it, rather than queue one each behind it (a channel runs one at a time).
  const declared = new Map<string, Promise<void>>();
  const declare = (channel: ConfirmChannel, type: string) => {
    let declaring = declared.get(type);
    if (!declaring) {
      declared.set(type, (declaring = declareExchange(channel, names, type).then(() => {})));
      declaring.catch(() => declared.delete(type));
    }
    return declaring;
  };
  const timeoutMs = options.timeoutMs ?? PUBLISH_TIMEOUT_MS;
  // A lost connection is opened again by the next publication; what was not confirmed was not
  // published, and the relay publishes it again.
  const connection = reopening(endpoint, timeoutMs, () => declared.clear());
  // On the connection, confirmed within `timeoutMs`, or that connection is taken for dead and dropped.
  const confirmed = (publication: (channel: ConfirmChannel) => Promise<void>) => {
    const opening = connection.open();
    return acceptedWithin(
      opening.then(({ channel }) => publication(channel)),
      timeoutMs,
      () => connection.drop(opening),
    );
  };

  return {
    publish: (envelopes) => (envelopes.length === 0 ? Promise.resolve() : confirmed((c) => publish(c, envelopes))),
    redeliver: (consumer, messageId, payload) => confirmed((c) => redeliver(c, consumer, messageId, payload)),
    close: () => connection.close(),
  };

  async function publish(channel: ConfirmChannel, envelopes: readonly AnyEnvelope[]) {
    const twice = faults.fires('publish-twice', 'publisher');
    for (const envelope of envelopes)
      if (!options.catalogue.contracts[envelope.type])
        throw new Error(`${envelope.type} is not in the catalogue: nobody subscribes to it`);
    await Promise.all([...new Set(envelopes.map((envelope) => envelope.type))].map((type) => declare(channel, type)));
    for (const envelope of envelopes) {
      const body = Buffer.from(JSON.stringify(envelope));
      const properties = propertiesOf(envelope.messageId, envelope.type);
      for (let copy = twice ? 2 : 1; copy > 0; copy--)
        channel.publish(exchangeOf(names, envelope.type), '', body, properties);
    }
    await channel.waitForConfirms(); // a nack rejects: not published, published again
    options.onPublished?.(envelopes, twice ? 2 : 1);
  }

  async function redeliver(channel: ConfirmChannel, consumer: string, messageId: string, payload: unknown) {
    const type = (payload as { type?: unknown } | null)?.type;
    // To the consumer's own queue through its redelivery exchange, which only its service's user
    // may write; a first attempt again, as it carries no attempt count.
    channel.publish(
      redeliveryExchangeOf(names, consumer),
      '',
      Buffer.from(JSON.stringify(payload)),
      propertiesOf(messageId, typeof type === 'string' ? type : 'unknown'),
    );
    await channel.waitForConfirms();
  }
}

interface Opened {
  readonly model: ChannelModel;
  readonly channel: ConfirmChannel;
}

/**
 * A connection and its confirm channel, opened on first use and again after either was closed or
 * failed, or was dropped (a channel RabbitMQ closes ends the whole connection: never left half
 * working; `lost` is told). Opening one fails after `timeoutMs`, as behind a dead link.
 */
function reopening(endpoint: Endpoint, timeoutMs: number, lost: () => void) {
  let opened: Promise<Opened> | undefined;
  const connectOnce = async (end: () => void): Promise<Opened> => {
    const model = await openConnection(endpoint, timeoutMs);
    const ending = () => {
      end();
      void model.close().catch(() => {});
    };
    model.on('error', ending);
    model.on('close', ending);
    const channel = await model.createConfirmChannel().catch((error: unknown) => {
      ending();
      throw error;
    });
    channel.on('error', ending);
    channel.on('close', ending);
    return { model, channel };
  };
  /**
   * Destroys the connection's socket, as its peer will never close it: the publications waiting
   * on it fail, and the next one opens another.
   */
  const drop = (dead: Promise<Opened>): void => {
    if (opened === dead) {
      opened = undefined;
      lost();
    }
    void dead.then(
      ({ model }) => (model.connection as unknown as { stream: Socket }).stream.destroy(),
      () => {},
    );
  };
  return {
    open(): Promise<Opened> {
      if (opened) return opened;
      const current: Promise<Opened> = connectOnce(() => {
        if (opened !== current) return;
        opened = undefined;
        lost();
      });
      opened = current;
      current.catch(() => {
        if (opened === current) opened = undefined;
      });
      return current;
    },
    drop,
    /** Closes the connection; one whose close is not answered in time is dropped. */
    async close(): Promise<void> {
      const current = opened;
      if (!current) return;
      opened = undefined;
      await acceptedWithin(
        current.then(({ model }) => model.close()),
        timeoutMs,
        () => drop(current),
      ).catch(() => {});
    },
  };
}
