import { notify } from '@idem/database';
import { createTestDatabase, waitFor } from '@idem/testkit';
import { describe, expect, it } from 'vitest';
import { createLogger } from './logger.js';
import { pollingWorker } from './periodic.js';

describe('pollingWorker', () => {
  it('with wakeOn, takes work when a committed notification says it is there, not at the next poll', async () => {
    const database = await createTestDatabase('polling_worker');
    let rounds = 0;
    let due = 0;
    const worker = pollingWorker(
      'test worker',
      async () => {
        rounds++;
        const taken = due;
        due = 0;
        return taken;
      },
      // A poll an hour away: only a notification can start the next round within this test.
      {
        idleMs: 3_600_000,
        log: createLogger('test', 'silent'),
        wakeOn: { databaseUrl: database.url, channel: 'idem_test_work' },
      },
    );
    worker.start();
    try {
      // The first round, and the one the LISTEN connection runs once it is up (work written while nobody listened).
      await waitFor(() => rounds >= 2, { what: 'the first rounds' });
      const before = rounds;
      due = 1;
      // A notification in a transaction that rolls back wakes nobody.
      await database.prisma
        .$transaction(async (tx) => {
          await notify(tx, 'idem_test_work');
          throw new Error('rolled back');
        })
        .catch(() => {});
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(rounds).toBe(before);
      // Committed, it does: one round takes the work, the next finds none and sleeps.
      await database.prisma.$transaction((tx) => notify(tx, 'idem_test_work'));
      await waitFor(() => rounds === before + 2, { what: 'the woken rounds' });
      expect(due).toBe(0);
    } finally {
      await worker.stop(); // ends the hour-long sleep at once
      await database.drop();
    }
  });
});
