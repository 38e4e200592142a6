import { defaultDeliveryPolicy, subscriptionsOf, type DeliveryPolicy, type Transport } from '@idem/transport';
import { startConsumer, type ConsumerOptions } from './consumer.js';
import type { DURABILITIES } from './durability.js';
import { createPublisher, type Publisher, type PublisherOptions } from './publisher.js';
import type { BrokerOptions } from './redis.js';

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
 * The BullMQ transport: a queue per consumer, a job per message under its message id, retries by
 * BullMQ's exponential backoff, a lock per delivery that another instance takes over when its owner
 * dies. The publisher writes to the queue of each consumer the catalogue subscribes to the contract.
 */
export function bullmq(options: BullmqOptions = {}): Transport<Publisher> {
  const policy = options.policy ?? defaultDeliveryPolicy;
  return {
    system: 'bullmq',
    policy,
    createPublisher: (publishing) => createPublisher({ ...options, ...publishing, policy }),
    // A consumer's queue is written to by the producers whose catalogue names it: nothing to declare.
    subscribe: async ({ catalogue, consumer }) => void subscriptionsOf(catalogue, consumer),
    startConsumer: (consuming) => startConsumer({ ...options, ...consuming }),
  };
}
