import { subscribersOf, type Envelope } from '@idem/contracts';
import { Queue } from 'bullmq';
import { defaultDeliveryPolicy, jobOptions, type DeliveryPolicy } from './delivery-policy.js';
import { createRedis, resolveBroker, type BrokerOptions } from './redis.js';

export interface PublisherOptions extends BrokerOptions {
  readonly policy?: DeliveryPolicy;
}

export interface Publisher {
  /** Fans each envelope out to every subscriber's queue, `jobId = messageId`. */
  publish(envelopes: readonly Envelope[]): Promise<void>;
  /** Delivers a payload again to one consumer's queue under the same id (dead-letter replay). */
  redeliver(consumer: string, messageId: string, payload: unknown): Promise<void>;
  close(): Promise<void>;
}

export function createPublisher(options: PublisherOptions = {}): Publisher {
  const { redisUrl, prefix } = resolveBroker(options);
  const policy = options.policy ?? defaultDeliveryPolicy;
  const connection = createRedis(redisUrl, 'producer');
  const queues = new Map<string, Queue>();
  const queue = (name: string) => {
    let q = queues.get(name);
    if (!q) queues.set(name, (q = new Queue(name, { connection, prefix })));
    return q;
  };

  return {
    async publish(envelopes) {
      const byConsumer = new Map<string, Envelope[]>();
      for (const envelope of envelopes) {
        for (const consumer of subscribersOf(envelope.type)) {
          byConsumer.set(consumer, [...(byConsumer.get(consumer) ?? []), envelope]);
        }
      }
      await Promise.all(
        [...byConsumer].map(([consumer, batch]) =>
          queue(consumer).addBulk(
            batch.map((envelope) => ({
              name: envelope.type,
              data: envelope,
              opts: jobOptions(policy, envelope.messageId),
            })),
          ),
        ),
      );
    },
    async redeliver(consumer, messageId, payload) {
      const q = queue(consumer);
      // A dead-lettered job may still sit in BullMQ's failed set under this id, and an add
      // with an existing id is ignored: remove it first so the replay is really delivered.
      await (await q.getJob(messageId))?.remove();
      const type = (payload as { type?: unknown } | null)?.type;
      await q.add(typeof type === 'string' ? type : 'unknown', payload, jobOptions(policy, messageId));
    },
    async close() {
      await Promise.all([...queues.values()].map((q) => q.close()));
      connection.disconnect();
    },
  };
}
