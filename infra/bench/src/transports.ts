import { execFileSync } from 'node:child_process';
import { countdown } from './stats.js';
import { cpuOfProcess } from './cpu.js';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { connect } from 'amqplib';

/**
 * A bare delivery on each transport, side by side: messages published in batches of 100 as the
 * relay publishes (BullMQ: `addBulk`; RabbitMQ: a confirm channel, the batch confirmed), taken by
 * one consumer at the services' concurrency whose handler does nothing, and settled (BullMQ
 * completes the job; RabbitMQ acknowledges it). Nothing of idem's: the broker's own price, a floor
 * under a delivery on it. As fast as it goes; the broker's CPU from /proc, the client's from Node.
 */
export interface TransportDelivery {
  readonly transport: 'bullmq' | 'rabbitmq';
  readonly deliveries: number;
  /** Deliveries settled per second, the first publication to the last settlement. */
  readonly perSecond: number;
  /** CPU of the process publishing and consuming (µs a delivery). */
  readonly clientUs: number;
  /** CPU of the broker's server (µs a delivery): redis-server, or RabbitMQ's Erlang VM. */
  readonly brokerUs: number;
}

const BATCH = 100;
const CONCURRENCY = 8; // the services' CONSUMER_CONCURRENCY

/** A transport as the bench drives it: publish a batch, and a consumer that counts what it settled. */
interface BareTransport {
  readonly brokerPid: number;
  publish(from: number, count: number): Promise<void>;
  consume(settle: () => void): Promise<void>;
  close(): Promise<void>;
}

/** Both transports, one after the other, `deliveries` each after a warm-up of a tenth. */
export async function transportDeliveries(
  redis: { url: string; pid: number },
  rabbitmqUrl: string,
  deliveries: number,
): Promise<TransportDelivery[]> {
  return [
    await measure('bullmq', await bullmqBare(redis), deliveries),
    await measure('rabbitmq', await rabbitmqBare(rabbitmqUrl), deliveries),
  ];
}

async function measure(
  transport: TransportDelivery['transport'],
  bare: BareTransport,
  deliveries: number,
): Promise<TransportDelivery> {
  let settled = countdown(0);
  await bare.consume(() => settled.tick());
  let next = 0;
  const deliver = async (count: number) => {
    settled = countdown(count);
    for (let sent = 0; sent < count; sent += BATCH) {
      await bare.publish(next, Math.min(BATCH, count - sent));
      next += BATCH;
    }
    await settled.done;
  };
  try {
    await deliver(Math.max(BATCH, Math.round(deliveries / 10))); // warm-up
    const before = { cpu: process.cpuUsage(), broker: cpuOfProcess(bare.brokerPid), at: performance.now() };
    await deliver(deliveries);
    const seconds = (performance.now() - before.at) / 1000;
    const cpu = process.cpuUsage(before.cpu);
    const brokerMs = cpuOfProcess(bare.brokerPid) - before.broker;
    return {
      transport,
      deliveries,
      perSecond: Math.round(deliveries / seconds),
      clientUs: Math.round((cpu.user + cpu.system) / deliveries),
      brokerUs: Math.round((brokerMs * 1000) / deliveries),
    };
  } finally {
    await bare.close();
  }
}

async function bullmqBare(redis: { url: string; pid: number }): Promise<BareTransport> {
  const prefix = `bare-transport${Date.now()}`;
  const connection = new Redis(redis.url, { maxRetriesPerRequest: null });
  const workerConnection = new Redis(redis.url, { maxRetriesPerRequest: null });
  const queue = new Queue('bare', { connection, prefix });
  let worker: Worker | undefined;
  return {
    brokerPid: redis.pid,
    publish: async (from, count) => {
      const jobs = Array.from({ length: count }, (_, i) => ({
        name: 'm',
        data: { i: from + i },
        opts: { jobId: `m${from + i}`, removeOnComplete: { age: 3600 } },
      }));
      await queue.addBulk(jobs);
    },
    consume: async (settled) => {
      worker = new Worker('bare', async () => {}, { connection: workerConnection, prefix, concurrency: CONCURRENCY });
      worker.on('completed', settled);
      await worker.waitUntilReady();
    },
    close: async () => {
      await worker?.close();
      await queue.obliterate({ force: true });
      await queue.close();
      for (const client of [connection, workerConnection]) client.disconnect();
    },
  };
}

async function rabbitmqBare(url: string): Promise<BareTransport> {
  const name = `bench.bare${Date.now()}`;
  const model = await connect(url);
  const publishing = await model.createConfirmChannel();
  const consuming = await model.createChannel();
  await publishing.assertExchange(name, 'fanout', { durable: true });
  await publishing.assertQueue(name, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
  await publishing.bindQueue(name, name, '');
  return {
    brokerPid: rabbitmqPid(),
    publish: async (from, count) => {
      for (let i = 0; i < count; i++)
        publishing.publish(name, '', Buffer.from(JSON.stringify({ i: from + i })), {
          persistent: true,
          messageId: `m${from + i}`,
        });
      await publishing.waitForConfirms();
    },
    consume: async (settled) => {
      await consuming.prefetch(CONCURRENCY);
      await consuming.consume(name, (message) => {
        if (!message) return;
        consuming.ack(message);
        settled();
      });
    },
    close: async () => {
      await publishing.deleteQueue(name);
      await publishing.deleteExchange(name);
      await model.close();
    },
  };
}

/** The RabbitMQ server this machine runs (its Erlang VM), whose CPU a delivery costs. */
function rabbitmqPid(): number {
  const pids = execFileSync('pgrep', ['-o', '-f', 'beam.smp.*rabbit'], { encoding: 'utf8' }).trim();
  return Number(pids.split('\n')[0]);
}
