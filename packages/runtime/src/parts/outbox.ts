import { answer, auditResult, requireOperator, route } from '@idem/http';
import { createPooledRelay, handoffFor, listParked, outboxBacklog, purgePublished, retryParked } from '@idem/outbox';
import type { SqlClient } from '@idem/database';
import type { Express, RequestHandler } from 'express';
import { z } from 'zod';
import { periodic } from '../periodic.js';
import { sharedWhileInFlight, type ServiceContext, type ServicePart } from '../run-service.js';

/**
 * Everything about the service's outbox: its backlog gauges (every process), its publication
 * (role `relay`: the handoff of the events this process's transactions commit, when the service's
 * client runs work after commit, and the relay, which publishes what other processes — an API
 * without the role — and crashes leave), the retention of published rows (role `workers`), and
 * the operator's routes for the rows the relay parked (role `http`).
 */
export function outbox(): ServicePart {
  return {
    name: 'outbox',
    start(context) {
      backlogGauges(context);
      const handoff = context.roles.has('relay') ? startHandoff(context) : undefined;
      const relay = context.roles.has('relay') ? startRelay(context) : undefined;
      const retention = context.roles.has('workers') ? startRetention(context) : undefined;
      return {
        routes(app) {
          if (context.roles.has('http')) parkedRoutes(app, context.db, requireOperator(context.operators));
        },
        async stop() {
          await retention?.stop();
          await relay?.stop();
          await handoff?.stop();
        },
      };
    },
  };
}

function backlogGauges({ db, metrics }: ServiceContext) {
  // Prometheus collects the gauges of one scrape at once: they share one backlog query.
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

/** Publication right after commit, on the process's publisher: the relay sweeps only what it leaves. */
function startHandoff({ name, db, faults, log, metrics, publisher }: ServiceContext) {
  const handoff = handoffFor(db);
  handoff.start({
    publish: (events) => publisher.publish(events),
    name: `${name}.handoff`,
    faults,
    onError: (error) => log.warn({ err: error }, 'outbox handoff failed: the relay publishes these events'),
    onPublished: (count) => metrics.relayPublished.inc({ by: 'handoff' }, count),
  });
  return handoff;
}

/**
 * The relay, on a pool of its own: its batches in flight hold their connections while they wait
 * for the broker, so a broker outage holds the relay's connections and never the API's or the
 * consumers' (docs/benchmarks/log.md, "The relay").
 */
function startRelay({ name, config, faults, log, metrics, publisher }: ServiceContext) {
  const relay = createPooledRelay({
    databaseUrl: config.DATABASE_URL,
    publish: (batch) => publisher.publish(batch),
    concurrency: config.RELAY_CONCURRENCY,
    name: `${name}.relay`,
    faults,
    onError: (error) => log.warn({ err: error }, 'relay: publication failed, backing off'),
    onBatch: (batch) =>
      batch.error ? metrics.relayFailures.inc() : metrics.relayPublished.inc({ by: 'relay' }, batch.published),
  });
  relay.start();
  return relay;
}

function startRetention({ name, config, db, log, metrics }: ServiceContext) {
  const retention = periodic(
    `${name} outbox retention`,
    config.MAINTENANCE_INTERVAL_MS,
    async () => {
      const deleted = await purgePublished(db, { retentionMs: config.OUTBOX_RETENTION_MS });
      metrics.retentionDeleted.inc({ table: 'outbox_messages' }, deleted);
      return { outboxMessagesDeleted: deleted };
    },
    log,
  );
  retention.start();
  return retention;
}

function parkedRoutes(app: Express, db: SqlClient, admin: RequestHandler) {
  route(
    app,
    {
      method: 'get',
      path: '/outbox/parked',
      summary: 'Outbox rows the relay parked, with their last error',
      audience: 'operator',
      use: [admin],
      responses: {
        200: answer(
          'The `parked` rows, oldest first',
          z.object({
            parked: z.array(
              z.object({
                messageId: z.uuid(),
                type: z.string(),
                attempts: z.number().int(),
                lastError: z.string().nullable(),
                createdAt: z.iso.datetime(),
              }),
            ),
          }),
        ),
      },
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
      responses: { 200: answer('How many were `retried`', z.object({ retried: z.number().int() })) },
    },
    async ({ body: { messageIds } }, _req, res) =>
      void res.json(auditResult(res, { retried: await retryParked(db, messageIds) })),
  );
}
