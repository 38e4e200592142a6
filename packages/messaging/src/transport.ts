import { defaultDeliveryPolicy, type DeliveryPolicy, type Transport } from '@idem/transport';
import { startConsumer, type ConsumerOptions } from './consumer.js';
import type { DURABILITIES } from './durability.js';
import { createPublisher, type Publisher, type PublisherOptions } from './publisher.js';
import type { BrokerOptions } from './redis.js';
import { subscribeConsumer } from './subscriptions.js';

/** BullMQ on Redis as a transport: its Redis, delivery policy, durability and locks, for every publisher and consumer of it. */
export interface BullmqOptions
  extends
    BrokerOptions,
    Pick<ConsumerOptions<never, never, never>, 'lockDurationMs' | 'stalledIntervalMs' | 'maxStalledCount'>,
    Pick<PublisherOptions, 'durabilityTimeoutMs'> {
  /** @defaultValue defaultDeliveryPolicy */
  readonly policy?: DeliveryPolicy;
  /** What "published" waits for (durability.ts). @defaultValue 'auto' */
  readonly durability?: (typeof DURABILITIES)[number];
}

/**
 * The BullMQ transport: a queue per consumer, where each producer adds what it publishes for every
 * consumer subscribed to the contract (subscriptions.ts), a job per message under its message id,
 * retries by BullMQ's exponential backoff under the consumer's policy, a lock per delivery that
 * another instance takes over when its owner dies.
 */
export function bullmq(options: BullmqOptions = {}): Transport<Publisher> {
  const policy = options.policy ?? defaultDeliveryPolicy;
  return {
    system: 'bullmq',
    policy,
    createPublisher: (publishing) => createPublisher({ ...options, ...publishing, policy }),
    subscribe: async ({ catalogue, consumer }) => void (await subscribeConsumer({ ...options, catalogue, consumer })),
    startConsumer: (consuming) => startConsumer({ ...options, ...consuming }),
  };
}
