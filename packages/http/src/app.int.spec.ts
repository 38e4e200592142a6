import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { requireOperator } from './operators.js';
import { createHttpApp, listen, type RunningServer } from './app.js';
import { HttpError } from './errors.js';
import { validate } from './validate.js';

let server: RunningServer;
let databaseUp = true;
const unhealthy: string[] = [];
/** Every error the service's own translation was asked about. */
const translated: unknown[] = [];
const base = () => `http://127.0.0.1:${server.port}`;

beforeAll(async () => {
  const app = createHttpApp({
    bodyLimit: '1kb',
    onUnhealthy: (check, error) => unhealthy.push(`${check}: ${(error as Error).message}`),
    translateError: (error) => {
      translated.push(error);
      return (error as { busy?: boolean }).busy
        ? new HttpError('dependency_unavailable', 'the database is busy')
        : undefined;
    },
    health: {
      database: async () => {
        if (!databaseUp) throw new Error('connect ECONNREFUSED 10.1.2.3:5432 (user orders)');
      },
    },
    routes: (app) => {
      app.post('/things', (req, res) => {
        const body = validate(z.object({ name: z.string().min(1), count: z.number().int().positive() }), req.body);
        res.status(201).json(body);
      });
      app.post(
        '/admin/reset',
        requireOperator([{ name: 'ops', token: 's3cret' }]),
        (_req, res) => void res.status(204).end(),
      );
      app.post('/disabled', requireOperator([]), (_req, res) => void res.status(204).end());
      app.get('/things/:name', (req, res) => void res.json({ name: req.params.name }));
      app.get('/busy', () => {
        throw Object.assign(new Error('pool exhausted'), { busy: true });
      });
      app.get('/boom', () => {
        throw new Error('password=hunter2');
      });
    },
  });
  server = await listen(app, 0);
});
afterAll(() => server.close());

const post = (path: string, body: string, headers: Record<string, string> = {}) =>
  fetch(`${base()}${path}`, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });

describe('createHttpApp', () => {
  it('answers invalid input with 400 problem details naming each field', async () => {
    const res = await post('/things', JSON.stringify({ name: '', count: -1 }));
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(await res.json()).toMatchObject({
      status: 400,
      code: 'invalid_request',
      errors: [expect.objectContaining({ field: 'body.name' }), expect.objectContaining({ field: 'body.count' })],
    });
  });

  it('answers non-JSON with 400, a wrong media type with 415 and an oversized body with 413', async () => {
    expect((await post('/things', '{"name":')).status).toBe(400);
    expect((await post('/things', 'name=x', { 'content-type': 'text/plain' })).status).toBe(415);
    const big = await post('/things', JSON.stringify({ name: 'x'.repeat(5000), count: 1 }));
    expect(big.status).toBe(413);
    expect(await big.json()).toMatchObject({ code: 'payload_too_large' });
  });

  it("answers a path that does not decode with 400 and a charset it cannot read with 415, never 500, and never asks the service's translation", async () => {
    translated.length = 0;
    const lone = await fetch(`${base()}/things/%ED%A0%80`);
    expect(lone.status).toBe(400);
    expect(await lone.json()).toMatchObject({ code: 'invalid_request' });
    const latin = await post('/things', '{"name":"x","count":1}', {
      'content-type': 'application/json; charset=latin-9',
    });
    expect(latin.status).toBe(415);
    expect(await latin.json()).toMatchObject({ code: 'unsupported_media_type' });
    expect(translated).toEqual([]);
  });

  it('guards operator endpoints: 401 without a token, 403 with a wrong one, disabled without configuration', async () => {
    expect((await post('/admin/reset', '')).status).toBe(401);
    expect((await post('/admin/reset', '', { authorization: 'Bearer nope' })).status).toBe(403);
    expect((await post('/admin/reset', '', { authorization: 'Bearer s3cret' })).status).toBe(204);
    expect(await (await post('/disabled', '', { authorization: 'Bearer s3cret' })).json()).toMatchObject({
      code: 'admin_disabled',
    });
  });

  it('answers an error the service recognises as a busy dependency with 503 and Retry-After', async () => {
    const res = await fetch(`${base()}/busy`);
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(await res.json()).toMatchObject({ code: 'dependency_unavailable' });
  });

  it('hides the message of an unexpected error', async () => {
    const res = await fetch(`${base()}/boom`);
    expect(res.status).toBe(500);
    expect(await res.text()).not.toContain('hunter2');
  });

  it('reports health per dependency and 503 when one fails, without the error (hosts, ports) in the answer', async () => {
    expect(await (await fetch(`${base()}/health`)).json()).toEqual({ status: 'ok', checks: { database: 'ok' } });
    databaseUp = false;
    const res = await fetch(`${base()}/health`);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ status: 'unavailable', checks: { database: 'failing' } });
    expect(unhealthy).toEqual(['database: connect ECONNREFUSED 10.1.2.3:5432 (user orders)']); // logged instead
    // Liveness never looks at a dependency: restarting the process cannot bring the database back.
    const live = await fetch(`${base()}/health/live`);
    expect([live.status, await live.json()]).toEqual([200, { status: 'ok' }]);
    databaseUp = true;
  });

  it('drops a client that sends its headers too slowly, instead of holding the connection for minutes', async () => {
    const app = createHttpApp({ health: {}, routes: () => {} });
    const slow = await listen(app, 0, { headersTimeoutMs: 500 });
    try {
      const socket = connect(slow.port, '127.0.0.1');
      await new Promise((resolve) => socket.once('connect', resolve));
      const started = Date.now();
      socket.write('GET /health HTTP/1.1\r\nHost: x\r\n'); // and never the blank line that ends the headers
      let answer = '';
      socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
      await new Promise((resolve) => socket.once('close', resolve));
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(answer).toMatch(/^HTTP\/1\.1 408/);
    } finally {
      await slow.close();
    }
  });
});
