import type { ConfirmChannel, Message } from 'amqplib';

/** The ids of `mandatory` messages RabbitMQ returned on each channel, till their publication looks. */
const returnsOn = new WeakMap<ConfirmChannel, Set<string>>();

/** What came back on `channel`, heard by one listener a channel however many publications share it. */
function returnsOf(channel: ConfirmChannel): Set<string> {
  let returns = returnsOn.get(channel);
  if (!returns) {
    const heard = (returns = new Set<string>());
    channel.on('return', (message: Message) => heard.add(String(message.properties.messageId)));
    returnsOn.set(channel, returns);
  }
  return returns;
}

/**
 * Publishes what `publish` sends on `channel` and waits for RabbitMQ's confirms (a nack rejects:
 * not published, published again); resolves to those of `ids` whose `mandatory` message came back
 * unrouted (RabbitMQ returns one before it confirms it).
 */
export async function unroutedOf(
  channel: ConfirmChannel,
  ids: readonly string[],
  publish: (channel: ConfirmChannel) => void,
): Promise<string[]> {
  const returns = returnsOf(channel);
  try {
    publish(channel);
    await channel.waitForConfirms();
    return ids.filter((id) => returns.has(id));
  } finally {
    for (const id of ids) returns.delete(id);
  }
}
