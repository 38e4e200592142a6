import type { AnyEnvelope } from '@idem/contracts';
import { noFaults } from '@idem/faults';
import type { Publisher, PublisherOptions } from '@idem/transport';
import { connect, type ChannelModel, type ConfirmChannel } from 'amqplib';
import { declareExchange, exchangeOf, queueOf, type Names } from './topology.js';

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
export function createRabbitPublisher(url: string, names: Names, options: PublisherOptions): Publisher {
  const faults = options.faults ?? noFaults;
  let opened: Promise<{ model: ChannelModel; channel: ConfirmChannel }> | undefined;
  const declared = new Set<string>();
  const open = () =>
    (opened ??= (async () => {
      const model = await connect(url);
      const channel = await model.createConfirmChannel();
      // A lost connection is opened again by the next publication; what was not confirmed
      // was not published, and the outbox relay publishes it again.
      const forget = () => {
        opened = undefined;
        declared.clear();
      };
      model.on('close', forget);
      model.on('error', forget);
      channel.on('error', forget);
      return { model, channel };
    })().catch((error: unknown) => {
      opened = undefined;
      throw error;
    }));

  return {
    async publish(envelopes: readonly AnyEnvelope[]) {
      if (envelopes.length === 0) return;
      const { channel } = await open();
      const twice = faults.fires('publish-twice', 'publisher');
      for (const envelope of envelopes) {
        if (!options.catalogue.contracts[envelope.type])
          throw new Error(`${envelope.type} is not in the catalogue: nobody subscribes to it`);
        if (!declared.has(envelope.type)) {
          await declareExchange(channel, names, envelope.type);
          declared.add(envelope.type);
        }
      }
      for (const envelope of envelopes) {
        const body = Buffer.from(JSON.stringify(envelope));
        const properties = propertiesOf(envelope.messageId, envelope.type);
        for (let copy = twice ? 2 : 1; copy > 0; copy--)
          channel.publish(exchangeOf(names, envelope.type), '', body, properties);
      }
      await channel.waitForConfirms(); // a nack rejects: not published, published again
      options.onPublished?.(envelopes, twice ? 2 : 1);
    },
    async redeliver(consumer, messageId, payload) {
      const { channel } = await open();
      const type = (payload as { type?: unknown } | null)?.type;
      // To the consumer's own queue (the default exchange routes by queue name), no one else's.
      channel.sendToQueue(
        queueOf(names, consumer),
        Buffer.from(JSON.stringify(payload)),
        propertiesOf(messageId, typeof type === 'string' ? type : 'unknown'),
      );
      await channel.waitForConfirms();
    },
    async close() {
      const current = opened;
      opened = undefined;
      if (current) await (await current).model.close().catch(() => {});
    },
  };
}
