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

  it('with wakeOn and a batch size, a round short of a full batch sleeps instead of claiming again', async () => {
    const database = await createTestDatabase('polling_worker_batch');
    let rounds = 0;
    let due = 0;
    const worker = pollingWorker(
      'test worker',
      async () => {
        rounds++;
        const taken = Math.min(due, 3);
        due -= taken;
        return taken;
      },
      {
        idleMs: 3_600_000,
        log: createLogger('test', 'silent'),
        wakeOn: { databaseUrl: database.url, channel: 'idem_test_batch' },
        batchSize: 3,
      },
    );
    worker.start();
    try {
      await waitFor(() => rounds >= 2, { what: 'the first rounds' });
      const before = rounds;
      due = 2; // less than a batch: one round takes it all, and no empty round follows
      await database.prisma.$transaction((tx) => notify(tx, 'idem_test_batch'));
      await waitFor(() => rounds === before + 1, { what: 'the woken round' });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect([rounds, due]).toEqual([before + 1, 0]);
      due = 5; // a full batch means more may wait: rounds go on until one comes up short
      await database.prisma.$transaction((tx) => notify(tx, 'idem_test_batch'));
      await waitFor(() => due === 0, { what: 'the backlog taken' });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(rounds).toBe(before + 3);
    } finally {
      await worker.stop();
      await database.drop();
    }
  });
});
