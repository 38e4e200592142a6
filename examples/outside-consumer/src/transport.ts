// The one line that names the broker: BullMQ on Redis, or RabbitMQ with TRANSPORT=rabbitmq (at RABBITMQ_URL).
// Everything else in this service is the same code on either.
import { bullmq } from '@idem/messaging';
import { rabbitmq } from '@idem/rabbitmq';

const prefix = process.env.QUEUE_PREFIX ?? 'library';
export const transport =
  process.env.TRANSPORT === 'rabbitmq'
    ? rabbitmq({ url: process.env.RABBITMQ_URL, prefix })
    : bullmq({ redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', prefix });
