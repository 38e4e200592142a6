import type { CatalogueSpec, ConsumerName } from '@idem/contracts';
import type { SqlClient } from '@idem/database';
import {
  consumerRunnerOf,
  messageIdOf,
  type ConsumerOptions as AnyConsumerOptions,
  type ConsumerRunner,
  type DeliveryReport,
  type Received,
  type Consumer as AnyConsumer,
  type DeliveryPolicy,
  UnservedSubscriptionError,
} from '@idem/transport';
import { QueueKeys, UnrecoverableError, Worker, type Job, type WorkerOptions } from 'bullmq';
import { SILENT, watchLiveness } from './liveness.js';
import { createRedis, queueName, resolveBroker, type BrokerOptions, type RedisClient } from './redis.js';
import { subscribeConsumer } from './subscriptions.js';

export type { DeliveryReport };

/** A consumer's options on BullMQ: the transport's, its Redis, and how its deliveries are locked. */
export interface ConsumerOptions<Tx extends SqlClient, S extends CatalogueSpec, C extends ConsumerName<S>>
  extends AnyConsumerOptions<Tx, S, C>, BrokerOptions {
  /** How long a delivery stays locked to this instance before another may take it. @defaultValue 30000 */
  readonly lockDurationMs?: number;
  /**
   * How often this instance looks for deliveries whose owner died, and (no more often than every
   * 5 s) whether its own worker still takes the deliveries that wait (liveness.ts). @defaultValue 30000
   */
  readonly stalledIntervalMs?: number;
  /** Redeliveries after an owner died before the message is dead-lettered. @defaultValue 5 */
  readonly maxStalledCount?: number;
  /**
   * How its deliveries are retried and kept: its own, written where its producers read it
   * (subscriptions.ts), whatever theirs. @defaultValue defaultDeliveryPolicy
   */
  readonly policy?: DeliveryPolicy;
}

/** A running consumer: its BullMQ worker, and how to stop it. */
export interface Consumer extends AnyConsumer {
  readonly worker: Worker;
  /** Stops taking deliveries; waits up to `timeoutMs` for in-flight ones, then abandons them to redelivery. */
  close(timeoutMs?: number): Promise<void>;
}

/**
 * Runs one consumer: each delivery is validated, handed to the inbox, and settled only after
 * the inbox transaction has committed. processed, duplicate, stale and conflicting_duplicate
 * complete the job; a transient failure is retried with backoff; a permanent failure, or a
 * transient one on its last attempt, becomes a dead letter and never a processed record.
 */
export function startConsumer<Tx extends SqlClient, S extends CatalogueSpec, C extends ConsumerName<S>>(
  options: ConsumerOptions<Tx, S, C>,
): Consumer {
  const {
    consumer,
    concurrency = 8,
    lockDurationMs = 30_000,
    stalledIntervalMs = 30_000,
    maxStalledCount = 5,
    onRecorded,
    onError = () => {},
  } = options;
  const runner = consumerRunnerOf(options, 'bullmq');
  const { redisUrl, prefix } = resolveBroker(options);
  const name = queueName(consumer, redisUrl);
  const settings = {
    prefix,
    concurrency,
    lockDuration: lockDurationMs,
    stalledInterval: stalledIntervalMs,
    maxStalledCount,
  };
  const startWorker = () => workerOf(runner, { redisUrl, name, settings, onRecorded, onError });
  let current = startWorker();
  // A worker that stopped fetching while deliveries wait is replaced (liveness.ts says why).
  const waitList = new QueueKeys(prefix).toKey(name, 'wait');
  const liveness = watchLiveness({
    everyMs: stalledIntervalMs,
    progress: () => ({ started: current.counts.started, roomLeft: current.counts.inFlight < concurrency }),
    waiting: async () => (await inTime(current.connection.llen(waitList), stalledIntervalMs)) ?? SILENT,
    replace: (why) => {
      const wedged = current;
      current = startWorker();
      onError(new Error(`${consumer}: ${why}; its worker was replaced`));
      void close(wedged, 1_000).catch(onError);
    },
  });
  const subscriptions = subscribeUntilDone(options, { redisUrl, prefix });
  const ready = Promise.all([current.worker.waitUntilReady(), subscriptions.ready]).then(() => undefined);
  ready.catch(onError);
  return {
    ready,
    get worker() {
      return current.worker;
    },
    close: async (timeoutMs = 10_000) => {
      liveness.stop();
      await subscriptions.close();
      await close(current, timeoutMs);
    },
  };
}

/**
 * Subscribes the consumer to its contracts (saying which nobody has declared yet) — again and
 * again until Redis lets it, on connections of their own, so a consumer started while Redis is
 * out of reach subscribes once it is back (subscriptions.ts).
 */
function subscribeUntilDone<Tx extends SqlClient, S extends CatalogueSpec, C extends ConsumerName<S>>(
  options: ConsumerOptions<Tx, S, C>,
  { redisUrl, prefix }: { redisUrl: string; prefix: string },
): { ready: Promise<void>; close(): Promise<void> } {
  const { consumer, policy, onError = () => {} } = options;
  let closed = false;
  const ready = (async () => {
    while (!closed) {
      try {
        const unserved = await subscribeConsumer({ redisUrl, prefix, catalogue: options.catalogue, consumer, policy });
        for (const contract of unserved) onError(new UnservedSubscriptionError(consumer, contract));
        return;
      } catch (error) {
        if (closed) return;
        onError(error);
        await new Promise((resolve) => setTimeout(resolve, 1_000));
      }
    }
  })();
  return {
    ready,
    async close() {
      closed = true;
      await ready.catch(() => {});
    },
  };
}

/** A job as the runner reads it: its data, its id, and which attempt of how many. */
const receivedOf = (job: Job): Received => ({
  data: job.data,
  brokerId: job.id,
  attempt: job.attemptsMade + 1,
  lastAttempt: job.attemptsMade + 1 >= (job.opts.attempts ?? 1),
});

/**
 * A BullMQ worker on a connection of its own whose job handler is the runner's `process`: a settled
 * delivery completes its job (return), a retry fails it for BullMQ to retry with backoff (throw),
 * a dead letter fails it for good (`UnrecoverableError`). It counts what it started.
 */
function workerOf<Tx extends SqlClient>(
  runner: ConsumerRunner<Tx>,
  { redisUrl, name, settings, onRecorded, onError }: WorkerSetup,
): RunningWorker {
  const connection = createRedis(redisUrl, 'worker');
  const counts = { started: 0, inFlight: 0 };
  // Each delivery's report, until BullMQ recorded how its job ended (only for onRecorded).
  const reports = onRecorded ? new WeakMap<Job, DeliveryReport>() : undefined;
  const run = async (job: Job) => {
    counts.started++;
    counts.inFlight++;
    try {
      const settlement = await runner.process(receivedOf(job));
      reports?.set(job, settlement.report);
      if (settlement.settle === 'settle') return settlement.report.outcome.outcome;
      throw settlement.settle === 'dead' ? new UnrecoverableError(settlement.reason) : new Error(settlement.reason);
    } finally {
      counts.inFlight--;
    }
  };
  const worker = new Worker(name, run, { connection, ...settings });
  worker.on('error', onError);
  if (onRecorded && reports) {
    const recorded = (job: Job | undefined) => {
      const report = job && reports.get(job);
      if (!report) return;
      reports.delete(job);
      onRecorded(report);
    };
    worker.on('completed', recorded);
    worker.on('failed', recorded);
  }
  worker.on('failed', (job, error) => {
    // BullMQ fails a job on its own when its owners kept dying; keep it as a dead letter too.
    if (job && /stalled more than allowable limit|started more than allowable limit/.test(error.message)) {
      const stalled = { data: job.data, brokerId: job.id, attempt: job.attemptsStarted };
      runner.deadLetter(stalled, messageIdOf(job.data, job.id), 'stalled_too_often', error.message).catch(onError);
    }
  });
  return { worker, connection, counts };
}

interface WorkerSetup {
  readonly redisUrl: string;
  readonly name: string;
  readonly settings: Omit<WorkerOptions, 'connection'>;
  readonly onRecorded: ((report: DeliveryReport) => void) | undefined;
  readonly onError: (error: unknown) => void;
}

interface RunningWorker {
  readonly worker: Worker;
  readonly connection: RedisClient;
  readonly counts: { started: number; inFlight: number };
}

/** What `promise` resolves to, or undefined once `ms` passed first. */
async function inTime<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Stops taking deliveries; waits up to `timeoutMs` for in-flight ones, then abandons them to
 * redelivery. A wedged worker may not close even by force: it is not waited for longer.
 */
async function close({ worker, connection }: RunningWorker, timeoutMs: number) {
  const finished = await inTime(
    worker.close().then(() => true),
    timeoutMs,
  );
  // In-flight deliveries that did not finish are abandoned: their locks expire and
  // another instance redelivers them, which the inbox makes safe.
  if (!finished) await inTime(worker.close(true), timeoutMs);
  // BullMQ closes only the connections it made itself, and not one whose QUIT goes unanswered (a
  // dead link): its blocking one and ours are disconnected, which never waits on Redis.
  await inTime(worker.disconnect(), timeoutMs);
  connection.disconnect();
}
