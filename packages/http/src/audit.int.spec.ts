import { describe, expect, it } from 'vitest';
import { createHttpApp, listen } from './app.js';
import { correlationIdOf, type AuditEvent } from './audit.js';
import { route } from './openapi.js';
import { requireOperator } from './operators.js';

describe('an audit event', () => {
  it('carries the correlation id the action itself used, chosen once per request, when the caller sent none', async () => {
    const events: AuditEvent[] = [];
    const used: string[] = [];
    const app = createHttpApp({
      health: {},
      audit: (event) => events.push(event),
      routes: (app) =>
        route(
          app,
          {
            method: 'post',
            path: '/act',
            summary: 'an operator action',
            audience: 'operator',
            use: [requireOperator([{ name: 'ops', token: 'ops-token-0123456789' }])],
            responses: { 204: 'done' },
          },
          (_input, req, res) => {
            used.push(correlationIdOf(req, res)); // e.g. the id its outbox rows carry
            res.status(204).end();
          },
        ),
    });
    const server = await listen(app, 0);
    try {
      const res = await fetch(`http://127.0.0.1:${server.port}/act`, {
        method: 'POST',
        headers: { authorization: 'Bearer ops-token-0123456789' },
      });
      expect(res.status).toBe(204);
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(used).toHaveLength(1);
      expect(events).toEqual([expect.objectContaining({ actor: 'ops', correlationId: used[0] })]);
    } finally {
      await server.close();
    }
  });

  it('names the target of a refused action as it does a done one', async () => {
    const events: AuditEvent[] = [];
    const app = createHttpApp({
      health: {},
      audit: (event) => events.push(event),
      routes: (app) =>
        route(
          app,
          {
            method: 'put',
            path: '/stock/:sku',
            summary: 'an operator action on one SKU',
            audience: 'operator',
            use: [requireOperator([{ name: 'ops', token: 'ops-token-0123456789' }])],
            responses: { 204: 'done' },
          },
          (_input, _req, res) => void res.status(204).end(),
        ),
    });
    const server = await listen(app, 0);
    try {
      for (const token of ['ops-token-0123456789', 'not-the-token']) {
        await fetch(`http://127.0.0.1:${server.port}/stock/keyboard`, {
          method: 'PUT',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ available: 4 }),
        });
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(events.map(({ outcome, target }) => [outcome, target])).toEqual([
        ['done', { sku: 'keyboard', available: 4 }],
        ['refused', { sku: 'keyboard', available: 4 }],
      ]);
    } finally {
      await server.close();
    }
  });
});
