import type { Catalogue, CatalogueSpec, ConsumerName, MessageOf, AnyEnvelope } from '@idem/contracts';
import type { SqlClient } from '@idem/database';
import type { Faults } from '@idem/faults';
import type { Inbox, MessageHandler } from '@idem/inbox';
import { QueueKeys, Worker, type Job, type WorkerOptions } from 'bullmq';
import { ConsumerRunner, messageIdOf, type DeliveryReport } from './consumer-runner.js';
import { watchLiveness } from './liveness.js';
import { createRedis, queueName, resolveBroker, type BrokerOptions, type RedisClient } from './redis.js';

export type { DeliveryReport };

/** The catalogue, the consumer's name, its inbox and its handler, and how deliveries are retried. */
export interface ConsumerOptions<
  Tx extends SqlClient,
  S extends CatalogueSpec,
  C extends ConsumerName<S>,
> extends BrokerOptions {
  /** The system's catalogue: the contracts this consumer takes, and their schemas. */
  readonly catalogue: Catalogue<S>;
  /** Its stable name: its queue's, and half of the inbox's dedupe key. */
  readonly consumer: C;
  readonly inbox: Inbox<Tx>;
  readonly handler: MessageHandler<Tx, MessageOf<S, NoInfer<C>>>;
  /** Deliveries handled at once by this instance; keep it within the database pool. @defaultValue 8 */
  readonly concurrency?: number;
  /**
   * Group commit: deliveries this instance handles at the same time share one inbox transaction
   * and one commit (`inbox.consumeBatch`), at most this many; each stays all-or-nothing on its
   * own (a refusal or error sends the batch back one at a time), and every one is settled only
   * after the shared commit. 1 gives every delivery its own transaction. @defaultValue concurrency
   */
  readonly maxBatch?: number;
  /** How long a delivery stays locked to this instance before another may take it. @defaultValue 30000 */
  readonly lockDurationMs?: number;
  /**
   * How often this instance looks for deliveries whose owner died, and (no more often than every
   * 5 s) whether its own worker still takes the deliveries that wait (liveness.ts). @defaultValue 30000
   */
  readonly stalledIntervalMs?: number;
  /** Redeliveries after an owner died before the message is dead-lettered. @defaultValue 5 */
  readonly maxStalledCount?: number;
  readonly faults?: Faults;
  /** A delivery larger than this (as JSON) is dead-lettered unread. @defaultValue 262144 */
  readonly maxPayloadBytes?: number;
  readonly onDelivery?: (report: DeliveryReport) => void;
  /**
   * Called once the broker has recorded how a delivery ended (completed it, scheduled its retry,
   * or failed it for good), with the same report; never for a delivery whose process died before.
   * For records that must not slow or affect the delivery (the journal).
   */
  readonly onRecorded?: (report: DeliveryReport) => void;
  /** Errors of the worker itself (Redis connection, dead-letter write). */
  readonly onError?: (error: unknown) => void;
}

/** A running consumer: its BullMQ worker, and how to stop it. */
export interface Consumer {
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
  const runner = runnerOf(options);
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
    waiting: () => inTime(current.connection.llen(waitList), stalledIntervalMs),
    replace: (waiting) => {
      const wedged = current;
      current = startWorker();
      onError(new Error(`${consumer}: started no delivery while ${waiting} waited; its worker was replaced`));
      void close(wedged, 1_000).catch(onError);
    },
  });
  return {
    get worker() {
      return current.worker;
    },
    close: (timeoutMs = 10_000) => {
      liveness.stop();
      return close(current, timeoutMs);
    },
  };
}

/** The consumer runner of these options: their defaults, and the contracts the consumer takes. */
function runnerOf<Tx extends SqlClient, S extends CatalogueSpec, C extends ConsumerName<S>>(
  options: ConsumerOptions<Tx, S, C>,
): ConsumerRunner<Tx> {
  const { consumer, inbox, concurrency = 8, maxBatch = concurrency } = options;
  // The handler takes the contract this consumer subscribes to; the runner hands it only
  // envelopes parsed against that contract.
  const handler = options.handler as unknown as MessageHandler<Tx, AnyEnvelope>;
  const catalogue = options.catalogue as unknown as Catalogue;
  const contracts = (catalogue.consumers as Record<string, readonly string[] | undefined>)[consumer];
  if (!contracts) throw new Error(`${consumer} subscribes to nothing in the catalogue`);
  return new ConsumerRunner({
    catalogue,
    consumer,
    inbox,
    handler,
    contracts,
    maxBatch,
    maxPayloadBytes: options.maxPayloadBytes ?? 256 * 1024,
    faults: options.faults,
    onDelivery: options.onDelivery,
    onError: options.onError,
    keepReports: options.onRecorded !== undefined,
  });
}

/**
 * A BullMQ worker on a connection of its own whose job handler is the runner's `process`, counting
 * what it started.
 */
function workerOf<Tx extends SqlClient>(
  runner: ConsumerRunner<Tx>,
  { redisUrl, name, settings, onRecorded, onError }: WorkerSetup,
): RunningWorker {
  const connection = createRedis(redisUrl, 'worker');
  const counts = { started: 0, inFlight: 0 };
  const run = (job: Job) => {
    counts.started++;
    counts.inFlight++;
    return runner.process(job).finally(() => counts.inFlight--);
  };
  const worker = new Worker(name, run, { connection, ...settings });
  worker.on('error', onError);
  if (onRecorded) {
    const recorded = (job: Job | undefined) => {
      const report = runner.takeReport(job);
      if (report) onRecorded(report);
    };
    worker.on('completed', recorded);
    worker.on('failed', recorded);
  }
  worker.on('failed', (job, error) => {
    // BullMQ fails a job on its own when its owners kept dying; keep it as a dead letter too.
    if (job && /stalled more than allowable limit|started more than allowable limit/.test(error.message)) {
      runner.deadLetter(job, messageIdOf(job), 'stalled_too_often', error.message, job.attemptsStarted).catch(onError);
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
  // BullMQ closes only the connections it made itself: this one is ours.
  connection.disconnect();
}
