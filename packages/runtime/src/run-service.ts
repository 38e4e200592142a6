import type { Catalogue, CatalogueSpec } from '@idem/contracts';
import type { SqlClient } from '@idem/database';
import {
  createHttpApp,
  HttpError,
  limitFailedAuthentications,
  listen,
  operatorsFromEnv,
  route,
  serveOpenApi,
  type RunningServer,
} from '@idem/http';
import { classifyFailure } from '@idem/inbox';
import {
  connectRedis,
  createDeliveryJournal,
  mastersOf,
  type DeliveryJournal,
  type Publisher,
  rateLimitPrefix,
  type RedisClient,
} from '@idem/messaging';
import { createMetrics, type Metrics } from '@idem/observability';
import type { Idem } from '@idem/service';
import type { BaseConfig } from './config.js';
import { queueGauges, startServiceIdem } from './idem.js';
import type { Logger } from './logger.js';
import { sharedWhileInFlight, type ServiceContext, type ServiceDefinition, type StartedPart } from './context.js';
import { deadLetters } from './parts/dead-letter-routes.js';
import { outbox } from './parts/outbox.js';

export interface RunningService {
  readonly http: RunningServer;
  readonly metrics: Metrics;
  readonly publisher: Publisher;
  stop(): Promise<void>;
}

/**
 * The process's delivery journal (see `createDeliveryJournal`), on a Redis connection of its own
 * that gives up at once when Redis is slow: the journal is lossy by design.
 */
function journalFor(config: BaseConfig, service: string): DeliveryJournal {
  if (!config.DELIVERY_JOURNAL) return NO_JOURNAL;
  // Connected from the start, so the first deliveries are journaled too; a write waits for a
  // reconnection at most once, then is dropped.
  const redis = connectRedis(config.REDIS_URL, { maxRetriesPerRequest: 0 });
  redis.on('error', () => {}); // the journal skips what it cannot write
  const journal = createDeliveryJournal({ redis, prefix: config.IDEM_QUEUE_PREFIX, service });
  return {
    ...journal,
    async close() {
      // What is buffered gets a second to reach Redis; a shutdown never waits on the journal longer.
      await Promise.race([journal.close(), new Promise((resolve) => setTimeout(resolve, 1_000).unref())]);
      redis.disconnect();
    },
  };
}

/** The journal of a process that keeps none (DELIVERY_JOURNAL off): what it is told goes nowhere. */
const NO_JOURNAL: DeliveryJournal = { record: () => {}, flush: async () => {}, close: async () => {} };

/** This process, as the journal and the console name it. */
export const processName = (service: string) => `${service}/${process.pid}`;

/**
 * Starts a service's parts in one process, with what they share (publisher, journal, metrics,
 * Redis), and an HTTP listener every process has — `/health` and `/metrics`, so each replica can
 * be checked and scraped — plus the parts' routes when the process has the `http` role. stop()
 * shuts down in the safe order: stop taking requests, stop the parts in reverse (consumers finish
 * or abandon in-flight deliveries, which are redelivered), then close connections.
 */
export async function runService<Tx extends SqlClient, S extends CatalogueSpec>(
  service: ServiceDefinition<Tx, S>,
): Promise<RunningService> {
  const { name, config, log, db } = service;
  const shared = sharedContext(service);
  const { redis, journal } = shared;
  const started: StartedPart[] = [];
  let idem: Idem<Tx, Publisher> | undefined;
  /** Parts in reverse, the composition (consumers finish or abandon in-flight deliveries), then the connections. */
  async function shutDown(): Promise<void> {
    for (const part of [...started].reverse()) await part.stop?.();
    await idem?.stop();
    await journal.close();
    redis.disconnect();
    await db.$disconnect();
  }
  let context: ServiceContext<Tx>;
  try {
    // Refuses to start (a retention shorter than the replay horizon) before anything runs.
    idem = startServiceIdem(service, shared);
    context = { ...shared, idem, publisher: idem.publisher };
    const consumers = Object.keys(service.consumers ?? {});
    if (consumers.length > 0 && context.roles.has('consumers')) queueGauges(context, consumers);
    const parts = [...(service.outbox ? [outbox()] : []), ...(consumers.length > 0 ? [deadLetters()] : [])];
    for (const part of [...parts, ...service.parts]) started.push(await part.start(context));
  } catch (error) {
    // A part that refuses to start (a retention shorter than the replay horizon) must not leave
    // those started before it running: a relay or consumers of a process that failed to start.
    await shutDown();
    throw error;
  }
  const { metrics, publisher } = context;
  const http = await listen(httpApp(context, started), config.PORT, { host: config.HOST }).catch(
    async (error: unknown) => {
      await shutDown();
      throw error;
    },
  );
  log.info({ roles: [...context.roles], port: http.port, parts: service.parts.map((p) => p.name) }, `${name} started`);

  return {
    http,
    metrics,
    publisher,
    async stop() {
      await http.close();
      await shutDown();
      log.info(`${name} stopped`);
    },
  };
}

/** What every part of the process shares but the composition: the delivery journal, metrics, Redis. */
function sharedContext<Tx extends SqlClient, S extends CatalogueSpec>({
  name,
  catalogue,
  config,
  log,
  db,
  faults,
}: ServiceDefinition<Tx, S>): Omit<ServiceContext<Tx>, 'idem' | 'publisher'> {
  const redis = connectRedis(config.REDIS_URL, { maxRetriesPerRequest: 1, lazyConnect: true });
  const metrics = createMetrics(name);
  redisGauges(metrics, redis);
  return {
    name,
    catalogue: catalogue as unknown as Catalogue,
    config,
    log,
    db,
    faults,
    roles: config.IDEM_ROLES,
    metrics,
    journal: journalFor(config, name),
    redis,
    process: processName(name),
    operators: operatorsFromEnv(config),
  };
}

/**
 * The process's HTTP app: `/health` and `/metrics` on every process, and the parts' routes (with
 * the OpenAPI document) when it has the `http` role; every operator action audited.
 */
function httpApp<Tx extends SqlClient>(context: ServiceContext<Tx>, started: readonly StartedPart[]) {
  const { name, config, log, db, redis, metrics } = context;
  return createHttpApp({
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
      for (const part of started) part.routes?.(app);
      if (context.roles.has('http')) serveOpenApi(app, { title: `idem ${name}`, version: '1' });
    },
    ...(config.TRUST_PROXY === undefined ? {} : { trustProxy: config.TRUST_PROXY }),
    guard: limitFailedAuthentications({
      redis,
      prefix: rateLimitPrefix(config.IDEM_QUEUE_PREFIX, name),
      perAddress: config.RATE_LIMIT_FAILED_AUTHENTICATIONS_PER_ADDRESS,
      perCustomer: config.RATE_LIMIT_FAILED_AUTHENTICATIONS_PER_CUSTOMER,
      windowMs: config.RATE_LIMIT_WINDOW_MS,
    }),
    // Every operator action, refused ones too: one structured event in the log (under `audit`,
    // for a log pipeline to ship) and a counter (docs/operations.md, "The audit trail").
    audit: (event) => {
      log.info({ audit: event }, `operator action: ${event.action} ${event.outcome}`);
      metrics.operatorActions.inc({ action: event.action, outcome: event.outcome });
    },
    // The access log: a line per request, in its trace (a probe's or a scrape's only at debug).
    onRequest: (request) =>
      log[QUIET_ROUTES.has(request.route) ? 'debug' : 'info'](
        { request },
        `${request.method} ${request.route} ${request.status}`,
      ),
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
}

/** Routes asked every few seconds by probes and scrapers: their access lines are debug-level. */
const QUIET_ROUTES = new Set(['/health', '/health/live', '/metrics']);

/**
 * Redis holds every queued delivery and evicts nothing (noeviction): when it is full, publishing
 * fails. These gauges let an alert fire before that; one INFO call serves both of a scrape.
 */
function redisGauges(metrics: Metrics, redis: RedisClient): void {
  // In a cluster, the master closest to full: the first to refuse a write.
  const readMemory = sharedWhileInFlight(async () => {
    const nodes = await Promise.all(
      mastersOf(redis).map(async (node) => {
        const info = await node.info('memory');
        return {
          used: Number(/^used_memory:(\d+)/m.exec(info)?.[1] ?? 0),
          max: Number(/^maxmemory:(\d+)/m.exec(info)?.[1] ?? 0),
        };
      }),
    );
    // Nearest its limit where limits are set; else the one using most.
    const fullness = ({ used, max }: { used: number; max: number }) => (max > 0 ? used / max : used);
    return nodes.reduce((fullest, node) => (fullness(node) > fullness(fullest) ? node : fullest));
  });
  metrics.gauge('idem_redis_memory_used_bytes', 'Memory Redis uses (INFO memory used_memory).', [], async () => [
    { labels: {}, value: (await readMemory()).used },
  ]);
  metrics.gauge(
    'idem_redis_memory_max_bytes',
    'The memory limit Redis is configured with (maxmemory; 0 when unlimited).',
    [],
    async () => [{ labels: {}, value: (await readMemory()).max }],
  );
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
