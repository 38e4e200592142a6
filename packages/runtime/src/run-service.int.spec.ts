import { Writable } from 'node:stream';
import { fromNodePostgres, migrate } from '@idem/database';
import { faultsFromEnv, noFaults } from '@idem/faults';
import { inboxTables, RetentionError } from '@idem/inbox';
import { outboxTables } from '@idem/outbox';
import { pino } from 'pino';
import {
  createPostgresServer,
  createTestDatabase,
  deleteQueues,
  migrationsFolder,
  redisUrl,
  uniqueName,
  waitFor,
} from '@idem/testkit';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { baseConfigSchema, parseConfig } from './config.js';
import { createLogger } from './logger.js';
import { faultSwitches } from './parts/fault-switches.js';
import type { ServicePart } from './context.js';
import { runService } from './run-service.js';
import { shop } from '@idem/shop';

const prefix = uniqueName('idem_test_runtime');
const processed = async () => ({ outcome: 'processed' as const });
afterAll(() => deleteQueues(prefix));

describe('runService', () => {
  it('refuses to start when the retention is shorter than the horizon or a part refuses; what started stops', async () => {
    const database = await createTestDatabase('runtime');
    const pool = new pg.Pool({ connectionString: database.url });
    const events: string[] = [];
    const recorder: ServicePart = {
      name: 'recorder',
      start: () => {
        events.push('started');
        return { stop: async () => void events.push('stopped') };
      },
    };
    const config = parseConfig(baseConfigSchema('runtime', 0), {
      DATABASE_URL: database.url,
      REDIS_URL: redisUrl,
      IDEM_QUEUE_PREFIX: prefix,
      LOG_LEVEL: 'silent',
      // Shorter than the replay horizon: the inbox's retention refuses to start.
      INBOX_RETENTION_MS: '1000',
    });
    try {
      const starting = runService({
        name: 'runtime',
        catalogue: shop,
        config,
        log: createLogger('runtime', 'silent'),
        db: fromNodePostgres(pool),
        faults: noFaults,
        consumers: { 'orders.stock-reserved.v1': processed },
        parts: [recorder],
      });
      await expect(starting).rejects.toBeInstanceOf(RetentionError);
      expect(events).toEqual([]); // refused before any part started
      expect(pool.ended).toBe(true);

      const refusing: ServicePart = {
        name: 'refusing',
        start: () => {
          throw new Error('refused');
        },
      };
      const failing = runService({
        name: 'runtime',
        catalogue: shop,
        config: { ...config, INBOX_RETENTION_MS: 30 * 24 * 3_600_000 },
        log: createLogger('runtime', 'silent'),
        db: fromNodePostgres(new pg.Pool({ connectionString: database.url })),
        faults: noFaults,
        consumers: { 'orders.stock-reserved.v1': processed },
        parts: [recorder, refusing],
      });
      await expect(failing).rejects.toThrow('refused');
      expect(events).toEqual(['started', 'stopped']); // the part before it stopped, and the consumers with it
    } finally {
      await database.drop();
    }
  });
});

describe('the audit trail', () => {
  const ALICE = 'alice-token-0123456789abcdef';
  const BOB = 'bob-token-0123456789abcdef';

  it('records every operator action once: who, what, the result, refused calls too, and never a token', async () => {
    const database = await createTestDatabase('runtime_audit');
    const pool = new pg.Pool({ connectionString: database.url });
    const lines: string[] = [];
    const log = pino(
      { level: 'info' },
      new Writable({ write: (chunk: Buffer, _encoding, done) => void (lines.push(chunk.toString()), done()) }),
    );
    const config = parseConfig(baseConfigSchema('runtime', 0), {
      DATABASE_URL: database.url,
      REDIS_URL: redisUrl,
      IDEM_QUEUE_PREFIX: prefix,
      ADMIN_TOKENS: `alice:${ALICE},bob:${BOB}`,
      IDEM_ROLES: 'http', // an API process: the operator's routes, no consumer
    });
    const db = fromNodePostgres(pool);
    const service = await runService({
      name: 'runtime',
      catalogue: shop,
      config,
      log,
      db,
      faults: noFaults,
      consumers: { 'orders.stock-reserved.v1': processed },
      outbox: true,
      parts: [],
    });
    const call = (method: string, path: string, token?: string, body?: unknown) =>
      fetch(`http://127.0.0.1:${service.http.port}${path}`, {
        method,
        headers: {
          'content-type': 'application/json',
          'x-correlation-id': '0b6f3c1e-9a53-4f5e-8d3e-3f7a9c1b2d4e',
          ...(token ? { authorization: `bearer ${token}` } : {}),
        },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
    const audits = () =>
      lines
        .map((line) => JSON.parse(line) as { audit?: Record<string, unknown> })
        .flatMap((l) => (l.audit ? [l.audit] : []));
    try {
      expect((await call('GET', '/dead-letters?limit=5', ALICE)).status).toBe(200);
      expect((await call('POST', '/dead-letters/replay', BOB, { consumer: 'nobody.v1' })).status).toBe(200);
      expect((await call('POST', '/outbox/parked/retry', 'not-a-token-of-anyone')).status).toBe(403);
      expect((await call('POST', '/outbox/parked/retry')).status).toBe(401);
      expect((await call('GET', '/health')).status).toBe(200); // not an operator action
      await new Promise((resolve) => setTimeout(resolve, 50)); // 'finish' fires after the answer is sent

      expect(audits()).toEqual([
        expect.objectContaining({
          actor: 'alice',
          action: 'GET /dead-letters',
          target: { limit: '5' },
          outcome: 'done',
          status: 200,
          correlationId: '0b6f3c1e-9a53-4f5e-8d3e-3f7a9c1b2d4e',
        }),
        expect.objectContaining({
          actor: 'bob',
          action: 'POST /dead-letters/replay',
          target: { consumer: 'nobody.v1' },
          result: { replayed: [], more: false },
          outcome: 'done',
        }),
        expect.objectContaining({
          actor: 'unknown',
          action: 'POST /outbox/parked/retry',
          outcome: 'refused',
          status: 403,
        }),
        expect.objectContaining({
          actor: 'unknown',
          action: 'POST /outbox/parked/retry',
          outcome: 'refused',
          status: 401,
        }),
      ]);
      const metrics = await (await call('GET', '/metrics')).text();
      expect(metrics).toMatch(
        /idem_operator_actions_total\{[^}]*action="POST \/outbox\/parked\/retry",outcome="refused"[^}]*\} 2/,
      );
      const everything = lines.join('');
      for (const secret of [ALICE, BOB, 'not-a-token-of-anyone']) expect(everything).not.toContain(secret);
    } finally {
      await service.stop();
      await database.drop();
    }
  });
});

describe('the fault switches token (FAULTS_TOKEN)', () => {
  it("opens a process's fault switches and no operator action", async () => {
    const database = await createTestDatabase('runtime_faults_token');
    const pool = new pg.Pool({ connectionString: database.url });
    const FAULTS_TOKEN = 'switches-only-token-0123456789';
    const config = parseConfig(baseConfigSchema('runtime', 0), {
      DATABASE_URL: database.url,
      REDIS_URL: redisUrl,
      IDEM_QUEUE_PREFIX: prefix,
      ADMIN_TOKEN: 'the-operators-own-token-0123456789',
      FAULTS_TOKEN,
    });
    const db = fromNodePostgres(pool);
    const service = await runService({
      name: 'runtime',
      catalogue: shop,
      config,
      log: createLogger('runtime', 'silent'),
      db,
      faults: faultsFromEnv({ IDEM_FAULTS_ENABLED: '1' }),
      consumers: { 'orders.stock-reserved.v1': processed },
      parts: [faultSwitches()],
    });
    const get = (path: string) =>
      fetch(`http://127.0.0.1:${service.http.port}${path}`, { headers: { authorization: `Bearer ${FAULTS_TOKEN}` } });
    try {
      expect((await get('/faults')).status).toBe(200);
      const deadLettersAnswer = await get('/dead-letters');
      expect(deadLettersAnswer.status).toBe(403);
      expect(await deadLettersAnswer.json()).toMatchObject({ code: 'forbidden' }); // enabled, and not for this token
    } finally {
      await service.stop();
      await database.drop();
    }
  });
});

describe('a service whose database is away when it starts', () => {
  it('starts anyway, answers /health 503 while the database is away, and 200 once it is back', async () => {
    const server = await createPostgresServer({ port: 15_731 });
    await server.start();
    const databaseUrl = `${server.url}/runtime_starts`;
    await migrate({ databaseUrl, migrationsDir: migrationsFolder(), include: [inboxTables, outboxTables] });
    await server.stop('fast');
    const config = parseConfig(baseConfigSchema('runtime', 0), {
      DATABASE_URL: databaseUrl,
      REDIS_URL: redisUrl,
      IDEM_QUEUE_PREFIX: prefix,
    });
    const pool = new pg.Pool({ connectionString: databaseUrl, connectionTimeoutMillis: 500 });
    pool.on('error', () => {});
    const db = fromNodePostgres(pool);
    const service = await runService({
      name: 'runtime',
      catalogue: shop,
      config,
      log: createLogger('runtime', 'silent'),
      db,
      faults: noFaults,
      consumers: { 'orders.stock-reserved.v1': processed },
      outbox: true,
      parts: [],
    });
    const health = async () => (await fetch(`http://127.0.0.1:${service.http.port}/health`)).status;
    try {
      expect(await health()).toBe(503);
      await server.start();
      await waitFor(async () => (await health()) === 200, { what: 'the database back', timeoutMs: 30_000 });
    } finally {
      await service.stop();
      await server.destroy();
    }
  }, 90_000);
});
