import { answer, auditResult, requireOperator, route } from '@idem/http';
import { outboxBacklog } from '@idem/outbox';
import type { Express, RequestHandler } from 'express';
import { z } from 'zod';
import { sharedWhileInFlight, type ServiceContext, type ServicePart } from '../context.js';

/**
 * What a service with an outbox shows its operator on every process: its backlog gauges, and
 * (role `http`) the routes of the rows the relay parked. The handoff, the relay and the purge of
 * published rows run in the composition (`@idem/service`).
 */
export function outbox(): ServicePart {
  return {
    name: 'outbox',
    start(context) {
      backlogGauges(context);
      return {
        routes(app) {
          if (context.roles.has('http')) parkedRoutes(app, context.idem.parked, requireOperator(context.operators));
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

function parkedRoutes(app: Express, parked: ServiceContext['idem']['parked'], admin: RequestHandler) {
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
    async (_input, _req, res) => void res.json({ parked: await parked.list() }),
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
      void res.json(auditResult(res, { retried: await parked.retry(messageIds) })),
  );
}
