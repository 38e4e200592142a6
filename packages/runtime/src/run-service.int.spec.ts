import { fromNodePostgres } from '@idem/database';
import { noFaults } from '@idem/faults';
import { RetentionError } from '@idem/inbox';
import { createTestDatabase, deleteQueues, redisUrl, uniqueName } from '@idem/testkit';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { baseConfigSchema, parseConfig } from './config.js';
import { createLogger } from './logger.js';
import { inboxRetention } from './parts/inbox.js';
import { runService, type ServicePart } from './run-service.js';

const prefix = uniqueName('idem_test_runtime');
afterAll(() => deleteQueues(prefix));

describe('runService', () => {
  it('stops the parts that started when a later one refuses to start, and closes its connections', async () => {
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
      // Shorter than the replay horizon: inboxRetention() refuses to start.
      INBOX_RETENTION_MS: '1000',
    });
    try {
      const starting = runService({
        name: 'runtime',
        config,
        log: createLogger('runtime', 'silent'),
        db: fromNodePostgres(pool),
        faults: noFaults,
        parts: [recorder, inboxRetention()],
      });
      await expect(starting).rejects.toBeInstanceOf(RetentionError);
      expect(events).toEqual(['started', 'stopped']);
      expect(pool.ended).toBe(true);
    } finally {
      await database.drop();
    }
  });
});
