import type { AnyEnvelope } from '@idem/contracts';
import { noFaults } from '@idem/faults';
import { acceptedWithin, PUBLISH_TIMEOUT_MS, type Publisher, type PublisherOptions } from '@idem/transport';
import type { Socket } from 'node:net';
import type { ChannelModel, ConfirmChannel } from 'amqplib';
import { unroutedOf } from './confirms.js';
import { openConnection, type Endpoint } from './connection.js';
import { NotSubscribedError } from './not-subscribed-error.js';
import { declareExchange, exchangeOf, redeliveryExchangeOf, subscribed, type Names } from './topology.js';

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
 * (for a quorum queue: written to a majority of its replicas). Before its first publication of a
 * contract, on each connection, it declares the exchange and waits for every consumer its catalogue
 * names to have subscribed (topology.ts): until then the publication fails, and the outbox keeps the
 * event. A contract the catalogue names consumers for is published `mandatory`: a message no queue
 * took comes back, and fails its publication rather than be confirmed to nobody.
 */
export function createRabbitPublisher(endpoint: Endpoint, names: Names, options: PublisherOptions): Publisher {
  const faults = options.faults ?? noFaults;
  const consumersOf = (type: string) => options.catalogue.contracts[type]?.consumers ?? [];
  // Each contract readied once per connection: publications that meet a declaration under way
  // wait for it, rather than queue one each behind it (a channel runs one at a time).
  const ready = new Map<string, Promise<void>>();
  const readied = (opened: Opened, type: string) => {
    let readying = ready.get(type);
    if (!readying) {
      ready.set(type, (readying = readyToPublish(opened, names, type, consumersOf(type))));
      readying.catch(() => ready.delete(type));
    }
    return readying;
  };
  const timeoutMs = options.timeoutMs ?? PUBLISH_TIMEOUT_MS;
  // A lost connection is opened again by the next publication; what was not confirmed was not
  // published, and the relay publishes it again.
  const connection = reopening(endpoint, timeoutMs, () => ready.clear());
  // On the connection, confirmed within `timeoutMs`, or that connection is taken for dead and dropped.
  const confirmed = (publication: (opened: Opened) => Promise<void>) => {
    const opening = connection.open();
    return acceptedWithin(opening.then(publication), timeoutMs, () => connection.drop(opening));
  };

  return {
    publish: (envelopes) => (envelopes.length === 0 ? Promise.resolve() : confirmed((c) => publish(c, envelopes))),
    redeliver: (consumer, messageId, payload) => confirmed((c) => redeliver(c, consumer, messageId, payload)),
    close: () => connection.close(),
  };

  async function publish(opened: Opened, envelopes: readonly AnyEnvelope[]) {
    const twice = faults.fires('publish-twice', 'publisher');
    for (const envelope of envelopes)
      if (!options.catalogue.contracts[envelope.type])
        throw new Error(`${envelope.type} is not in the catalogue: nobody subscribes to it`);
    const types = [...new Set(envelopes.map((envelope) => envelope.type))];
    await Promise.all(types.map((type) => readied(opened, type)));
    const mandatory = envelopes.filter((envelope) => owed(envelope.type)).map((envelope) => envelope.messageId);
    const [lost] = await unroutedOf(opened.channel, mandatory, (channel) => {
      for (const envelope of envelopes) {
        const body = Buffer.from(JSON.stringify(envelope));
        const properties = { ...propertiesOf(envelope.messageId, envelope.type), mandatory: owed(envelope.type) };
        for (let copy = twice ? 2 : 1; copy > 0; copy--)
          channel.publish(exchangeOf(names, envelope.type), '', body, properties);
      }
    });
    const type = envelopes.find((envelope) => envelope.messageId === lost)?.type;
    if (lost !== undefined) throw new Error(`${type} ${lost} reached no queue: not published`);
    options.onPublished?.(envelopes, twice ? 2 : 1);
  }

  /** Whether a contract's messages are owed to a queue: the catalogue names consumers of it. */
  function owed(type: string): boolean {
    return consumersOf(type).length > 0;
  }

  async function redeliver({ channel }: Opened, consumer: string, messageId: string, payload: unknown) {
    const type = (payload as { type?: unknown } | null)?.type;
    // To the consumer's own queue through its redelivery exchange, which only its service's user
    // may write; a first attempt again, as it carries no attempt count. A queue gone takes nothing:
    // the replay fails, and the dead letter stays as it was.
    const unrouted = await unroutedOf(channel, [messageId], (c) =>
      c.publish(redeliveryExchangeOf(names, consumer), '', Buffer.from(JSON.stringify(payload)), {
        ...propertiesOf(messageId, typeof type === 'string' ? type : 'unknown'),
        mandatory: true,
      }),
    );
    if (unrouted.length > 0) throw new Error(`${consumer} has no queue to take ${messageId}: not replayed`);
  }
}

/**
 * Declares a contract's exchange, and makes sure each of the `consumers` the catalogue names has
 * subscribed to it (topology.ts): else throws `NotSubscribedError`, nothing published.
 */
async function readyToPublish({ model, channel }: Opened, names: Names, type: string, consumers: readonly string[]) {
  await declareExchange(channel, names, type);
  const waiting = await Promise.all(consumers.map((consumer) => subscribed(model, names, consumer, type)));
  const first = consumers.find((_, i) => !waiting[i]);
  if (first !== undefined) throw new NotSubscribedError(first, type);
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
