/**
 * crashAt on a real consumer process (the library's fee consumer on BullMQ, through the published
 * composition): killed right after its inbox transaction committed, before BullMQ settled the
 * delivery, it is started again, takes the same delivery again, and charges once.
 */
import { fileURLToPath } from 'node:url';
import { bullmq } from '@idem/messaging';
import {
  createTestDatabase,
  deleteQueues,
  printed,
  redisUrl,
  startScript,
  uniqueName,
  exited,
  type TestDatabase,
} from '@idem/testkit';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bookLent, catalogue, CONSUMER } from '../test/library.js';
import { crashAt, CrashWindowNotReached } from './index.js';

const prefix = uniqueName('idem_testing_crash');
const consumerProcess = new URL('../test/consumer-process.ts', import.meta.url);
const command = [
  process.execPath,
  '--conditions=development',
  '--import',
  'tsx',
  fileURLToPath(consumerProcess),
] as const;

let database: TestDatabase;
let pool: pg.Pool;
beforeAll(async () => {
  database = await createTestDatabase('testing_crash');
  pool = new pg.Pool({ connectionString: database.url, max: 2 });
  await pool.query('CREATE TABLE fees (loan_id uuid NOT NULL, cents int NOT NULL)');
});
afterAll(async () => {
  await pool?.end();
  await database?.drop();
  await deleteQueues(prefix);
});

const env = () => ({ DATABASE_URL: database.url, REDIS_URL: redisUrl, IDEM_QUEUE_PREFIX: prefix });
const fees = async () => (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM fees')).rows[0]!.n;

describe('crashAt', () => {
  it('kills a consumer after its commit, before the broker settled it; started again, it charges once', async () => {
    const publisher = bullmq({ redisUrl, prefix }).createPublisher({ catalogue });
    const message = await bookLent();
    try {
      await publisher.publish([message]);
      const crash = await crashAt({ command, window: 'crash-after-commit', target: CONSUMER, env: env() });
      expect(crash.stderr).toContain(`fault crash-after-commit fired for ${CONSUMER}`);
      expect(crash.stdout).not.toContain('processed'); // it died before the broker recorded anything
      expect(await fees()).toBe(1); // and after the commit

      const again = startScript(consumerProcess, env());
      const answered = printed(again, `duplicate ${message.messageId}`); // the delivery came back
      try {
        await answered;
        expect(await fees()).toBe(1);
      } finally {
        again.kill('SIGTERM');
        await exited(again);
      }
    } finally {
      await publisher.close();
    }
  });

  it('rejects when the program never reaches the window', async () => {
    const never = crashAt({ command, window: 'crash-after-publish', env: env(), timeoutMs: 3_000 });
    await expect(never).rejects.toBeInstanceOf(CrashWindowNotReached);
    await expect(never).rejects.toThrow(/ran 3000 ms without crashing at crash-after-publish/);
  });
});
