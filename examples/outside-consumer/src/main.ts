// A service outside the idem repository that consumes `orders.order-placed.v1` with the
// published packages: the inbox records each message in the transaction that reserves stock,
// and the consumer runner settles a BullMQ delivery only after that commit. The demo then
// delivers the same message twice, as a broker does after a crash or a replay.
import { randomUUID } from 'node:crypto';
import { createEnvelope } from '@idem/contracts';
import { migrate } from '@idem/database';
import { createInbox, inboxTables, processed } from '@idem/inbox';
import { createPublisher, startConsumer, type DeliveryReport } from '@idem/messaging';
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from './generated/prisma/client.js';

const databaseUrl = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/outside';
const broker = {
  redisUrl: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
  prefix: process.env.QUEUE_PREFIX ?? 'outside',
};

// This project's migrations, and the inbox's tables applied before them.
await migrate({ databaseUrl, migrationsDir: 'prisma/migrations', include: [inboxTables] });
const db = new PrismaClient({ adapter: new PrismaPg({ connectionString: databaseUrl }) });

const settled: DeliveryReport[] = [];
const consumer = startConsumer({
  ...broker,
  consumer: 'inventory.order-placed.v1',
  inbox: createInbox({ db }),
  // Runs inside the inbox's transaction: the reservation and the processed record commit together.
  handler: async (message, tx) => {
    const units = message.body.lines.reduce((sum, line) => sum + line.quantity, 0);
    await tx.reservation.create({ data: { orderId: message.body.orderId, units, reservedAt: new Date() } });
    return processed;
  },
  onSettled: (report) => settled.push(report),
});

const orderId = randomUUID();
const message = createEnvelope(
  {
    type: 'orders.order-placed.v1',
    body: {
      orderId,
      customerEmail: 'ada@example.com',
      currency: 'eur',
      paymentMethod: 'pm_card_visa',
      lines: [{ sku: 'sku-1', quantity: 2, unitPriceCents: 500 }],
      totalCents: 1000,
    },
    aggregateId: orderId,
    aggregateVersion: 1,
    correlationId: randomUUID(),
    causationId: null,
  },
  new Date(),
);
const publisher = createPublisher(broker);
await publisher.publish([message]);
await until(() => settled.length === 1);
// The same message id again: the inbox answers `duplicate` and nothing changes.
await publisher.redeliver('inventory.order-placed.v1', message.messageId, message);
await until(() => settled.length === 2);

const reservations = await db.reservation.count({ where: { orderId } });
console.log(JSON.stringify({ outcomes: settled.map((report) => report.outcome.outcome), reservations }));

await consumer.close();
await publisher.close();
await db.$disconnect();

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await new Promise((resolve) => setTimeout(resolve, 20));
}
