import type { ConsumerName } from '@idem/contracts';
import type { SqlClient, TransactionalClient } from '@idem/database';
import { FAULT_NAMES, isSwitchboard, type Faults } from '@idem/faults';
import { createHttpApp, HttpError, listen, requireAdmin, route, serveOpenApi, type RunningServer } from '@idem/http';
import {
  classifyFailure,
  createInboxRetention,
  type DeadLetterCursor,
  type Inbox,
  type MessageHandler,
} from '@idem/inbox';
import {
  createDeliveryJournal,
  createPublisher,
  DeadLetterWriteError,
  defaultDeliveryPolicy,
  deliveryEntry,
  publicationEntries,
  maxRetrySpanMs,
  replayDeadLetters,
  ReplayWindowError,
  startConsumer,
  type Consumer,
  type ConsumerOptions,
  type DeliveryJournal,
  type DeliveryReport,
  type MessageOf,
  type Publisher,
} from '@idem/messaging';
import { createMetrics, type Metrics } from '@idem/observability';
import { createRelay, listParked, outboxBacklog, purgePublished, retryParked, type Relay } from '@idem/outbox';
import type { Express } from 'express';
import { Redis } from 'ioredis';
import { z } from 'zod';
import type { BaseConfig } from './config.js';
import { logDelivery, type Logger } from './logger.js';
import { periodic, type BackgroundWorker } from './periodic.js';

type RunnerOptions<Tx extends SqlClient> = Omit<ConsumerOptions<Tx, ConsumerName>, 'consumer' | 'handler'>;

/** One subscription of a service: a consumer name and its handler, typed together. */
export interface ConsumerSpec<Tx extends SqlClient> {
  readonly consumer: ConsumerName;
  readonly start: (options: RunnerOptions<Tx>) => Consumer;
}

export function consumer<Tx extends SqlClient, C extends ConsumerName>(
  name: C,
  handler: MessageHandler<Tx, MessageOf<NoInfer<C>>>,
): ConsumerSpec<Tx> {
  return { consumer: name, start: (options) => startConsumer({ ...options, consumer: name, handler }) };
}

/** A loop of the service's own (a payment worker, an email dispatcher). */
export interface ServiceDefinition<Tx extends SqlClient> {
  readonly name: string;
  readonly config: BaseConfig;
  readonly log: Logger;
  readonly db: TransactionalClient<Tx> & { $disconnect(): Promise<unknown> };
  readonly inbox: Inbox<Tx>;
  readonly faults: Faults;
  readonly consumers: readonly ConsumerSpec<Tx>[];
  /** Whether the service writes an outbox that a relay must publish. */
  readonly publishes: boolean;
  readonly workers?: readonly BackgroundWorker[];
  /** Adds the service's API; `redis` is the process's connection (rate limits count there). */
  readonly routes?: (app: Express, context: { redis: Redis }) => void;
  /** Registers the service's own gauges (work items by status, ...). */
  readonly metrics?: (metrics: Metrics) => void;
  /** Where deliveries (and the service's own provider calls) are recorded for people to see. @defaultValue one of its own ({@link journalFor}) */
  readonly journal?: DeliveryJournal;
}

/**
 * The process's delivery journal (see `createDeliveryJournal`), on a Redis connection of its own
 * that gives up at once when Redis is slow: the journal is lossy by design.
 */
export function journalFor(config: BaseConfig): DeliveryJournal {
  // Connected from the start, so the first deliveries are journaled too; a write waits for a
  // reconnection at most once, then is dropped.
  const redis = new Redis(config.REDIS_URL, { maxRetriesPerRequest: 0 });
  redis.on('error', () => {}); // the journal skips what it cannot write
  const journal = createDeliveryJournal({ redis, prefix: config.IDEM_QUEUE_PREFIX });
  return {
    ...journal,
    async close() {
      // What is buffered gets a second to reach Redis; a shutdown never waits on the journal longer.
      await Promise.race([journal.close(), new Promise((resolve) => setTimeout(resolve, 1_000).unref())]);
      redis.disconnect();
    },
  };
}

/** This process, as the journal and the console name it. */
export const processName = (service: string) => `${service}/${process.pid}`;

export interface RunningService {
  readonly http: RunningServer;
  readonly metrics: Metrics;
  readonly publisher: Publisher;
  stop(): Promise<void>;
}

/**
 * Starts what the configuration's roles ask for — HTTP, consumers, relay, workers — and
 * returns a stop() that shuts them down in the safe order: stop taking work, finish or
 * abandon in-flight deliveries (they are redelivered), then close connections.
 */
export async function runService<Tx extends SqlClient>(service: ServiceDefinition<Tx>): Promise<RunningService> {
  const { config, log, db, inbox, faults } = service;
  const roles = config.IDEM_ROLES;
  const broker = { redisUrl: config.REDIS_URL, prefix: config.IDEM_QUEUE_PREFIX };

  const redis = new Redis(config.REDIS_URL, { maxRetriesPerRequest: 1, lazyConnect: true });
  const metrics = createMetrics(service.name);
  service.metrics?.(metrics);
  const journal = service.journal ?? journalFor(config);
  const me = processName(service.name);
  const publisher = createPublisher({
    ...broker,
    faults,
    onPublished: (envelopes, copies) => {
      for (const entry of publicationEntries(envelopes, copies, me)) journal.record(entry);
    },
  });
  if (service.publishes) {
    // Prometheus collects both gauges of one scrape at once: they share one backlog query.
    const readBacklog = sharedWhileInFlight(() => outboxBacklog(db));
    metrics.gauge('idem_outbox_backlog', 'Outbox rows not yet published.', [], async () => [
      { labels: {}, value: (await readBacklog()).pending },
    ]);
    metrics.gauge(
      'idem_outbox_oldest_unpublished_age_seconds',
      'Age of the oldest unpublished outbox row (0 when none).',
      [],
      async () => [{ labels: {}, value: (await readBacklog()).oldestPendingAgeMs / 1000 }],
    );
    metrics.gauge(
      'idem_outbox_parked',
      'Outbox rows the relay parked after failing to publish them too often: an operator must look (GET /outbox/parked).',
      [],
      async () => [{ labels: {}, value: (await readBacklog()).parked }],
    );
  }

  let relay: Relay | undefined;
  if (service.publishes && roles.has('relay')) {
    relay = createRelay({
      db,
      databaseUrl: config.DATABASE_URL,
      publish: (batch) => publisher.publish(batch),
      name: `${service.name}.relay`,
      faults,
      onError: (error) => log.warn({ err: error }, 'relay: publication failed, backing off'),
      onBatch: (batch) => (batch.error ? metrics.relayFailures.inc() : metrics.relayPublished.inc(batch.published)),
    });
    relay.start();
  }

  const consumers: Consumer[] = roles.has('consumers')
    ? service.consumers.map((spec) =>
        spec.start({
          ...broker,
          inbox,
          faults,
          concurrency: config.CONSUMER_CONCURRENCY,
          lockDurationMs: config.CONSUMER_LOCK_MS,
          stalledIntervalMs: config.CONSUMER_STALLED_INTERVAL_MS,
          onDelivery: (report) => {
            logDelivery(log, report);
            countDelivery(metrics, report);
          },
          onSettled: (report) => journal.record(deliveryEntry(report, me)),
          onError: (error) => {
            if (error instanceof DeadLetterWriteError) {
              metrics.deadLetterWriteFailures.inc({ consumer: error.consumer });
              log.error({ err: error, consumer: error.consumer, messageId: error.messageId }, 'dead letter not stored');
            } else log.error({ err: error, consumer: spec.consumer }, 'consumer error');
          },
        }),
      )
    : [];

  if (consumers.length > 0) {
    metrics.gauge(
      'idem_queue_jobs',
      'Deliveries in each consumer queue by state (waiting, active, delayed, failed).',
      ['consumer', 'state'],
      async () =>
        (
          await Promise.all(
            service.consumers.map(async ({ consumer }) =>
              Object.entries(await publisher.jobCounts(consumer)).map(([state, value]) => ({
                labels: { consumer, state },
                value,
              })),
            ),
          )
        ).flat(),
    );
  }

  // Redis holds every queued delivery and evicts nothing (noeviction): when it is full, publishing
  // fails. These gauges let an alert fire before that; one INFO call serves both of a scrape.
  const readMemory = sharedWhileInFlight(() => redisMemory(redis));
  metrics.gauge('idem_redis_memory_used_bytes', 'Memory Redis uses (INFO memory used_memory).', [], async () => [
    { labels: {}, value: (await readMemory()).used },
  ]);
  metrics.gauge(
    'idem_redis_memory_max_bytes',
    'The memory limit Redis is configured with (maxmemory; 0 when unlimited).',
    [],
    async () => [{ labels: {}, value: (await readMemory()).max }],
  );

  const workers = roles.has('workers') ? [...(service.workers ?? []), maintenance(service, metrics)] : [];
  workers.forEach((worker) => worker.start());

  // Every process listens: /health and /metrics always (so each replica can be checked and
  // scraped), the service's API and the operator endpoints only with the http role.
  const app = createHttpApp({
    health: {
      database: () => db.$queryRaw`SELECT 1`,
      redis: () => redis.ping(),
    },
    routes: (app) => {
      route(
        app,
        {
          method: 'get',
          path: '/metrics',
          summary: 'Prometheus metrics of this process',
          responses: { 200: 'Text format' },
        },
        async (_input, _req, res) => {
          const { contentType, body } = await metrics.scrape();
          res.type(contentType).send(body);
        },
      );
      faultRoutes(app, { faults, adminToken: config.ADMIN_TOKEN, process: me });
      if (!roles.has('http')) return;
      service.routes?.(app, { redis });
      if (service.publishes) parkedRoutes(app, { db, adminToken: config.ADMIN_TOKEN });
      deadLetterRoutes(app, {
        inbox,
        publisher,
        adminToken: config.ADMIN_TOKEN,
        replayWindowMs: config.REPLAY_WINDOW_MS,
        log,
      });
      serveOpenApi(app, { title: `idem ${service.name}`, version: '1' });
    },
    onUnexpectedError: (error) => log.error({ err: error }, 'unexpected error answering a request'),
    onUnhealthy: (check, error) => log.warn({ err: error, check }, 'health check failing'),
    translateError: (error) => {
      const failure = classifyFailure(error);
      if (failure.code !== 'database_unavailable' && failure.code !== 'transaction_conflict') return undefined;
      log.warn({ err: error }, 'request refused: the database is busy or unreachable');
      return new HttpError(
        'dependency_unavailable',
        `the database is busy or unreachable (${failure.code}); retry shortly`,
        { cause: error },
      );
    },
  });
  const http = await listen(app, config.PORT);
  log.info(
    {
      roles: [...roles],
      port: http.port,
      consumers: consumers.length,
      relay: Boolean(relay),
      workers: workers.length,
    },
    `${service.name} started`,
  );

  return {
    http,
    metrics,
    publisher,
    async stop() {
      await http.close();
      await Promise.all(consumers.map((c) => c.close()));
      await Promise.all(workers.map((w) => w.stop()));
      await relay?.stop();
      await publisher.close();
      await journal.close();
      redis.disconnect();
      await db.$disconnect();
      log.info(`${service.name} stopped`);
    },
  };
}

/**
 * Retention: processed records older than INBOX_RETENTION_MS (refused at start when that is
 * shorter than the replay horizon) and published outbox rows older than OUTBOX_RETENTION_MS.
 */
function maintenance<Tx extends SqlClient>(
  { config, db, log, publishes, name }: ServiceDefinition<Tx>,
  metrics: Metrics,
): BackgroundWorker {
  const inboxRetention = createInboxRetention({
    db,
    retentionMs: config.INBOX_RETENTION_MS,
    horizon: {
      brokerRetentionMs: Math.max(defaultDeliveryPolicy.keepCompletedMs, defaultDeliveryPolicy.keepFailedMs),
      maxRetrySpanMs: maxRetrySpanMs(defaultDeliveryPolicy),
      replayWindowMs: config.REPLAY_WINDOW_MS,
    },
  });
  return periodic(
    `${name} retention`,
    config.MAINTENANCE_INTERVAL_MS,
    async () => {
      const processed = await inboxRetention.purge();
      const outbox = publishes ? await purgePublished(db, { retentionMs: config.OUTBOX_RETENTION_MS }) : 0;
      metrics.retentionDeleted.inc({ table: 'processed_messages' }, processed);
      metrics.retentionDeleted.inc({ table: 'outbox_messages' }, outbox);
      return { processedMessagesDeleted: processed, outboxMessagesDeleted: outbox };
    },
    log,
  );
}

function countDelivery(metrics: Metrics, report: DeliveryReport): void {
  const contract = report.contract ?? 'unknown';
  metrics.deliveries.inc({
    consumer: report.consumer,
    contract,
    producer: report.producer ?? 'unknown',
    outcome: report.outcome.outcome,
  });
  metrics.processingSeconds.observe({ consumer: report.consumer, contract }, report.durationMs / 1000);
  if (report.deadLettered) {
    const code =
      report.outcome.outcome === 'transient_failure'
        ? 'retries_exhausted'
        : 'code' in report.outcome
          ? report.outcome.code
          : 'unknown';
    metrics.deadLetters.inc({ consumer: report.consumer, code });
  }
}

function deadLetterRoutes(
  app: Express,
  {
    inbox,
    publisher,
    adminToken,
    replayWindowMs,
    log,
  }: {
    inbox: Inbox<SqlClient>;
    publisher: Publisher;
    adminToken: string | undefined;
    replayWindowMs: number;
    log: Logger;
  },
): void {
  const admin = requireAdmin(adminToken);
  // Pages without payloads (a dead letter may hold up to 64 KiB); one payload at a time below.
  route(
    app,
    {
      method: 'get',
      path: '/dead-letters',
      summary: 'Dead letters waiting for replay, a page at a time, without their payloads',
      audience: 'operator',
      use: [admin],
      query: z.object({
        consumer: z.string().max(200).optional(),
        limit: z.coerce.number().int().min(1).max(1000).default(100),
        after: z.string().max(1000).optional(),
      }),
      responses: { 200: '`deadLetters` and the cursor of the `next` page (null on the last)' },
    },
    async ({ query: { consumer, limit, after } }, _req, res) => {
      const page = await inbox.deadLetters.list({
        consumer,
        limit,
        payloads: false,
        ...(after ? { after: decodeCursor(after) } : {}),
      });
      const last = page.at(-1);
      res.json({
        deadLetters: page.map(({ payload: _payload, ...deadLetter }) => deadLetter),
        next: page.length === limit && last ? encodeCursor(last) : null,
      });
    },
  );
  route(
    app,
    {
      method: 'get',
      path: '/dead-letters/payload',
      summary: "One dead letter's payload, exactly as delivered",
      audience: 'operator',
      use: [admin],
      query: z.object({ consumer: z.string().max(200), messageId: z.string().max(200) }),
      responses: { 200: 'The payload', 404: 'No such dead letter waiting for replay' },
    },
    async ({ query: { consumer, messageId } }, _req, res) => {
      const [deadLetter] = await inbox.deadLetters.list({ consumer, messageIds: [messageId], limit: 1 });
      if (!deadLetter) throw new HttpError('not_found', 'no such dead letter waiting for replay');
      res.json({ consumer, messageId, payload: deadLetter.payload });
    },
  );
  route(
    app,
    {
      method: 'post',
      path: '/dead-letters/replay',
      summary: 'Publish dead letters again to their consumer (older than the replay window only with a reason)',
      audience: 'operator',
      use: [admin],
      body: z.object({
        consumer: z.string().max(200).optional(),
        messageIds: z.array(z.string().max(200)).max(1000).optional(),
        // Past the replay window a processed record may be gone: replaying then needs a reason.
        force: z.object({ reason: z.string().min(10).max(500) }).optional(),
      }),
      responses: { 200: 'The `replayed` dead letters', 409: 'Some are older than the replay window' },
    },
    async ({ body: { force, ...filter } }, _req, res) => {
      if (force) log.warn({ ...filter, reason: force.reason }, 'dead letters replayed past the replay window, forced');
      try {
        const replayed = await replayDeadLetters(inbox.deadLetters, publisher, filter, {
          replayWindowMs,
          ...(force ? { force } : {}),
        });
        res.json({ replayed: replayed.map((d) => ({ consumer: d.consumer, messageId: d.messageId })) });
      } catch (error) {
        if (!(error instanceof ReplayWindowError)) throw error;
        throw new HttpError('conflict', error.message, {
          errors: error.tooOld.map((d) => ({
            field: `${d.consumer}/${d.messageId}`,
            message: 'older than the replay window',
          })),
        });
      }
    },
  );
}

/** The relay's parked rows, for an operator: see them, and give them back to the relay once fixed. */
function parkedRoutes(app: Express, { db, adminToken }: { db: SqlClient; adminToken: string | undefined }): void {
  const admin = requireAdmin(adminToken);
  route(
    app,
    {
      method: 'get',
      path: '/outbox/parked',
      summary: 'Outbox rows the relay gave up on, with their last error',
      audience: 'operator',
      use: [admin],
      responses: { 200: 'The `parked` rows' },
    },
    async (_input, _req, res) => void res.json({ parked: await listParked(db) }),
  );
  route(
    app,
    {
      method: 'post',
      path: '/outbox/parked/retry',
      summary: 'Give parked rows (all, or these) back to the relay',
      audience: 'operator',
      use: [admin],
      body: z.object({ messageIds: z.array(z.uuid()).max(1000).optional() }),
      responses: { 200: 'How many were `retried`' },
    },
    async ({ body: { messageIds } }, _req, res) => void res.json({ retried: await retryParked(db, messageIds) }),
  );
}

const encodeCursor = ({ deadLetteredAt, consumer, messageId }: DeadLetterCursor) =>
  Buffer.from(JSON.stringify([deadLetteredAt.toISOString(), consumer, messageId])).toString('base64url');

function decodeCursor(cursor: string): DeadLetterCursor {
  try {
    const [at, consumer, messageId] = JSON.parse(Buffer.from(cursor, 'base64url').toString()) as string[];
    const deadLetteredAt = new Date(at ?? '');
    if (Number.isNaN(deadLetteredAt.getTime()) || typeof consumer !== 'string' || typeof messageId !== 'string')
      throw new Error('cursor');
    return { deadLetteredAt, consumer, messageId };
  } catch {
    throw new HttpError('invalid_request', 'after: not a cursor this endpoint gave', {
      errors: [{ field: 'query.after', message: 'not a cursor this endpoint gave' }],
    });
  }
}

const startedAt = new Date().toISOString();

/**
 * The process's fault switches, for an operator (the teaching console): only in a process
 * started with IDEM_FAULTS_ENABLED=1 — elsewhere these routes do not exist — and only with the
 * operator token. Every process has them, since each runs its own switches.
 */
function faultRoutes(
  app: Express,
  { faults, adminToken, process: name }: { faults: Faults; adminToken: string | undefined; process: string },
): void {
  if (!isSwitchboard(faults)) return;
  const admin = requireAdmin(adminToken);
  const state = () => ({ process: name, pid: process.pid, startedAt, switches: FAULT_NAMES, rules: faults.rules() });
  route(
    app,
    {
      method: 'get',
      path: '/faults',
      summary: "This process's fault switches (only with IDEM_FAULTS_ENABLED=1)",
      audience: 'operator',
      use: [admin],
      responses: { 200: 'The switches and the rules set' },
    },
    (_input, _req, res) => void res.json(state()),
  );
  route(
    app,
    {
      method: 'put',
      path: '/faults',
      summary: 'Replace the fault rules',
      audience: 'operator',
      use: [admin],
      body: z.object({
        rules: z
          .array(
            z.object({
              name: z.enum(FAULT_NAMES),
              target: z.string().min(1).max(200).optional(),
              probability: z.number().min(0).max(1).default(1),
              count: z.number().int().min(1).max(1_000_000).optional(),
            }),
          )
          .max(50),
      }),
      responses: { 200: 'The switches and the rules now set' },
    },
    ({ body: { rules } }, _req, res) => {
      faults.replace(rules);
      res.json(state());
    },
  );
}

/** Redis's memory use and limit, from INFO memory. */
async function redisMemory(redis: Redis): Promise<{ used: number; max: number }> {
  const info = await redis.info('memory');
  return {
    used: Number(/^used_memory:(\d+)/m.exec(info)?.[1] ?? 0),
    max: Number(/^maxmemory:(\d+)/m.exec(info)?.[1] ?? 0),
  };
}

/**
 * How long a service may take to stop after SIGTERM before it exits anyway. Whatever stops it
 * (compose's stop_grace_period, Kubernetes' terminationGracePeriodSeconds) must wait longer.
 */
export const SHUTDOWN_TIMEOUT_MS = 20_000;

/** Runs `stop` once on SIGTERM or SIGINT; exits non-zero if it takes longer than `timeoutMs`. */
export function stopOnSignal(stop: () => Promise<void>, log: Logger, timeoutMs = SHUTDOWN_TIMEOUT_MS): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    setTimeout(() => {
      log.error('shutdown took too long, exiting');
      process.exit(1);
    }, timeoutMs).unref();
    stop().then(
      () => process.exit(0),
      (error: unknown) => {
        log.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
}

/** Calls made while a read is under way share its answer, so the gauges of one scrape cost one read. */
function sharedWhileInFlight<T>(read: () => Promise<T>): () => Promise<T> {
  let inFlight: Promise<T> | undefined;
  return () => (inFlight ??= read().finally(() => (inFlight = undefined)));
}
