import {
  parseEnvelope,
  type AnyEnvelope,
  type Catalogue,
  type CatalogueSpec,
  type ConsumerName,
  type MessageOf,
  type ParseResult,
} from '@idem/contracts';
import type { SqlClient } from '@idem/database';
import { noFaults, type Faults } from '@idem/faults';
import { isSettled, type DeliveryOutcome, type Inbox, type MessageHandler } from '@idem/inbox';
import type { Span } from '@opentelemetry/api';
import { QueueKeys, UnrecoverableError, Worker, type Job, type WorkerOptions } from 'bullmq';
import { endProcess, startCommit, startProcess, under } from './consumer-spans.js';
import { deadLetterVerdict, DeadLetterWriteError } from './dead-letters.js';
import { createGroupCommit } from './group-commit.js';
import { watchLiveness } from './liveness.js';
import { createRedis, queueName, resolveBroker, type BrokerOptions, type RedisClient } from './redis.js';

/**
 * A delivery's message as the consumer reads it: the size is checked before any parsing (a huge
 * payload costs no validation work), then the envelope against the contracts it subscribes to.
 */
async function readDelivery(
  catalogue: Catalogue,
  data: unknown,
  contracts: readonly string[],
  maxPayloadBytes: number,
): Promise<ParseResult<AnyEnvelope>> {
  const bytes = Buffer.byteLength(JSON.stringify(data ?? null) ?? '');
  if (bytes > maxPayloadBytes) {
    const reason = `${bytes} bytes, more than the ${maxPayloadBytes} accepted`;
    return { ok: false, error: { code: 'payload_too_large', reason } };
  }
  return parseEnvelope(catalogue, data, contracts);
}

/** One delivery and how it ended: what logs, metrics and traces are made of. */
export interface DeliveryReport {
  readonly consumer: string;
  readonly messageId: string;
  /** Undefined when the message was too malformed to say. */
  readonly contract?: string;
  readonly producer?: string;
  readonly correlationId?: string;
  readonly causationId?: string | null;
  readonly traceparent?: string;
  /** 1 for the first delivery, 2 for the first retry, ... */
  readonly attempt: number;
  readonly durationMs: number;
  readonly outcome: DeliveryOutcome;
  /** Set when this delivery ended as a dead letter. */
  readonly deadLettered: boolean;
}

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
   * Called once the broker has settled a delivery (completed it, scheduled its retry, or
   * failed it for good), with the same report; never for a delivery whose process died
   * before settling. For records that must not slow or affect the delivery (the journal).
   */
  readonly onSettled?: (report: DeliveryReport) => void;
  /** Errors of the worker itself (Redis connection, dead-letter write). */
  readonly onError?: (error: unknown) => void;
}

/** A running consumer: its BullMQ worker, and how to stop it. */
export interface Consumer {
  readonly worker: Worker;
  /** Stops taking deliveries; waits up to `timeoutMs` for in-flight ones, then abandons them to redelivery. */
  close(timeoutMs?: number): Promise<void>;
}

/** The consumer's settings with their defaults, and what its deliveries share while it runs. */
interface Runner<Tx extends SqlClient> {
  readonly catalogue: Catalogue;
  readonly consumer: string;
  readonly inbox: Inbox<Tx>;
  readonly handler: MessageHandler<Tx, AnyEnvelope>;
  readonly contracts: readonly string[];
  readonly maxPayloadBytes: number;
  readonly faults: Faults;
  readonly onDelivery: (report: DeliveryReport) => void;
  readonly onError: (error: unknown) => void;
  /** Reports waiting for the broker to settle their job (only when `onSettled` is given). */
  readonly unsettled?: WeakMap<Job, DeliveryReport>;
  /** Hands a delivery to the group commit: resolves with its outcome once its transaction ended. */
  readonly inGroup: (delivery: { envelope: AnyEnvelope; span: Span }) => Promise<DeliveryOutcome>;
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
    onSettled,
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
  const startWorker = () => workerOf(runner, { redisUrl, name, settings, onSettled });
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

/** What a consumer's deliveries share: its settings with their defaults, and the contracts it takes. */
function runnerOf<Tx extends SqlClient, S extends CatalogueSpec, C extends ConsumerName<S>>(
  options: ConsumerOptions<Tx, S, C>,
): Runner<Tx> {
  const { consumer, inbox, concurrency = 8, maxBatch = concurrency, onSettled } = options;
  // The handler takes the contract this consumer subscribes to; the runner hands it only
  // envelopes parsed against that contract.
  const handler = options.handler as unknown as MessageHandler<Tx, AnyEnvelope>;
  const catalogue = options.catalogue as unknown as Catalogue;
  const contracts = (catalogue.consumers as Record<string, readonly string[] | undefined>)[consumer];
  if (!contracts) throw new Error(`${consumer} subscribes to nothing in the catalogue`);
  return {
    catalogue,
    consumer,
    inbox,
    handler,
    inGroup: createGroupCommit((deliveries) => commitBatch({ inbox, consumer, handler }, deliveries), maxBatch),
    contracts,
    maxPayloadBytes: options.maxPayloadBytes ?? 256 * 1024,
    faults: options.faults ?? noFaults,
    onDelivery: options.onDelivery ?? (() => {}),
    onError: options.onError ?? (() => {}),
    ...(onSettled ? { unsettled: new WeakMap<Job, DeliveryReport>() } : {}),
  };
}

/** A BullMQ worker on a connection of its own, its events wired to the runner, counting what it started. */
function workerOf<Tx extends SqlClient>(
  runner: Runner<Tx>,
  { redisUrl, name, settings, onSettled }: WorkerSetup,
): RunningWorker {
  const connection = createRedis(redisUrl, 'worker');
  const counts = { started: 0, inFlight: 0 };
  const run = (job: Job) => {
    counts.started++;
    counts.inFlight++;
    return processDelivery(runner, job).finally(() => counts.inFlight--);
  };
  const worker = new Worker(name, run, { connection, ...settings });
  worker.on('error', runner.onError);
  if (onSettled) {
    const settled = (job: Job | undefined) => {
      const report = job && runner.unsettled?.get(job);
      if (!report) return;
      runner.unsettled?.delete(job);
      onSettled(report);
    };
    worker.on('completed', settled);
    worker.on('failed', settled);
  }
  worker.on('failed', (job, error) => {
    // BullMQ fails a job on its own when its owners kept dying; keep it as a dead letter too.
    if (job && /stalled more than allowable limit|started more than allowable limit/.test(error.message)) {
      deadLetter(runner, job, 'stalled_too_often', error.message, job.attemptsStarted).catch(runner.onError);
    }
  });
  return { worker, connection, counts };
}

interface WorkerSetup {
  readonly redisUrl: string;
  readonly name: string;
  readonly settings: Omit<WorkerOptions, 'connection'>;
  readonly onSettled: ((report: DeliveryReport) => void) | undefined;
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

async function deadLetter<Tx extends SqlClient>(
  { inbox, consumer }: Runner<Tx>,
  job: Job,
  code: string,
  reason: string,
  attempts: number,
): Promise<void> {
  await inbox.deadLetters.record({
    consumer,
    messageId: job.id ?? 'unknown',
    payload: job.data,
    code,
    reason,
    attempts,
  });
}

/**
 * One batch of deliveries in one inbox transaction. A batch of one is an ordinary `consume`
 * under its delivery's span; a larger one gets a `commit` span linked to each delivery's.
 */
async function commitBatch<Tx extends SqlClient>(
  { inbox, consumer, handler }: Pick<Runner<Tx>, 'inbox' | 'consumer' | 'handler'>,
  deliveries: readonly { envelope: AnyEnvelope; span: Span }[],
): Promise<DeliveryOutcome[]> {
  if (deliveries.length === 1) {
    const [{ envelope, span }] = deliveries as [(typeof deliveries)[number]];
    return [await under(span, () => inbox.consume(consumer, envelope, handler))];
  }
  const span = startCommit(
    consumer,
    deliveries.map((delivery) => delivery.span),
  );
  const envelopes = deliveries.map((delivery) => delivery.envelope);
  return under(span, () => inbox.consumeBatch(consumer, envelopes, handler)).finally(() => span.end());
}

/**
 * A dead letter this delivery must become (a permanent failure, or a transient one on its last
 * attempt), stored before it is counted or logged: one that could not be written is not one,
 * and the job then fails as it is (BullMQ keeps failed jobs for days).
 */
async function keepDeadLetter<Tx extends SqlClient>(
  runner: Runner<Tx>,
  job: Job,
  outcome: DeliveryOutcome,
  attempt: number,
) {
  const verdict = deadLetterVerdict(outcome, { attempt, lastAttempt: attempt >= (job.opts.attempts ?? 1) });
  if (!verdict) return undefined;
  try {
    await deadLetter(runner, job, verdict.code, verdict.reason, attempt);
    return verdict;
  } catch (error) {
    runner.onError(new DeadLetterWriteError(runner.consumer, job.id ?? 'unknown', error));
    return undefined;
  }
}

/**
 * One delivery: read it, hand it to the inbox (a malformed one is refused without it), and settle
 * it only after the inbox transaction ended — complete it when settled, retry it, or fail it as a
 * dead letter.
 */
async function processDelivery<Tx extends SqlClient>(runner: Runner<Tx>, job: Job): Promise<string> {
  const { consumer, faults } = runner;
  const started = performance.now();
  const attempt = job.attemptsMade + 1;
  const parsed = await readDelivery(runner.catalogue, job.data, runner.contracts, runner.maxPayloadBytes);
  const envelope = parsed.ok ? parsed.envelope : undefined;
  const span = startProcess(consumer, job, envelope);
  const outcome: DeliveryOutcome = parsed.ok
    ? await runner.inGroup({ envelope: parsed.envelope, span })
    : { outcome: 'permanent_failure', code: parsed.error.code, reason: parsed.error.reason };
  const deadLettered = await keepDeadLetter(runner, job, outcome, attempt);
  endProcess(span, outcome, deadLettered !== undefined);
  const report: DeliveryReport = {
    consumer,
    messageId: envelope?.messageId ?? job.id ?? 'unknown',
    contract: envelope?.type,
    producer: envelope?.producer,
    correlationId: envelope?.correlationId,
    causationId: envelope?.causationId,
    traceparent: envelope?.traceparent,
    attempt,
    durationMs: performance.now() - started,
    outcome,
    deadLettered: deadLettered !== undefined,
  };
  // Told in the delivery's span, so that its log line carries the span's trace id.
  under(span, () => runner.onDelivery(report));
  runner.unsettled?.set(job, report);

  if (isSettled(outcome)) {
    // Settlement comes after the commit. A crash here leaves the job to be redelivered
    // once its lock expires, and the redelivery stops at the processed-message record.
    // (The switch fires only where that window is: after a commit that processed something.)
    if (outcome.outcome === 'processed') faults.crashIf('crash-after-commit', consumer);
    return outcome.outcome;
  }
  if (deadLettered) throw new UnrecoverableError(`${deadLettered.code}: ${deadLettered.reason}`);
  throw new Error(`${outcome.code}: ${outcome.reason}`); // BullMQ retries with backoff (or keeps it failed)
}
