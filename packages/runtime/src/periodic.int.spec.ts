import { notify } from '@idem/database';
import { createTestDatabase, waitFor } from '@idem/testkit';
import { describe, expect, it } from 'vitest';
import { createLogger } from './logger.js';
import { pollingWorker } from './periodic.js';

/**
 * A worker woken on `channel` whose rounds take up to `batchSize` of `work.due` and count
 * themselves in `work.rounds`. Its poll is an hour away: within a test only a notification
 * starts a round after the first ones.
 */
async function countingWorker(name: string, batchSize?: number, { room }: { room?: number } = {}) {
  const database = await createTestDatabase(name);
  const channel = `idem_test_${name}`;
  const work = { rounds: 0, due: 0 };
  const worker = pollingWorker(
    'test worker',
    async () => {
      work.rounds++;
      // With `room`, a round takes no more than that (its free connections) and says whether it
      // took all it could (so more may be due) instead of leaving the batch size to tell.
      const taken = Math.min(work.due, room ?? batchSize ?? Infinity);
      work.due -= taken;
      return room === undefined ? taken : { handled: taken, moreDue: taken === room };
    },
    {
      idleMs: 3_600_000,
      log: createLogger('test', 'silent'),
      wakeOn: { databaseUrl: database.url, channel },
      ...(batchSize === undefined ? {} : { batchSize }),
    },
  );
  worker.start();
  // The first round, and the one the LISTEN connection runs once it is up (work written while nobody listened).
  await waitFor(() => work.rounds >= 2, { what: 'the first rounds' });
  return {
    work,
    notifyCommitted: () => database.prisma.$transaction((tx) => notify(tx, channel)),
    notifyRolledBack: () =>
      database.prisma
        .$transaction(async (tx) => {
          await notify(tx, channel);
          throw new Error('rolled back');
        })
        .catch(() => {}),
    async stop() {
      await worker.stop(); // ends the hour-long sleep at once
      await database.drop();
    },
  };
}

const aMoment = () => new Promise((resolve) => setTimeout(resolve, 300));

describe('pollingWorker', () => {
  it('with wakeOn, takes work when a committed notification says it is there, not at the next poll', async () => {
    const { work, notifyCommitted, notifyRolledBack, stop } = await countingWorker('polling_worker');
    try {
      const before = work.rounds;
      work.due = 1;
      // A notification in a transaction that rolls back wakes nobody.
      await notifyRolledBack();
      await aMoment();
      expect(work.rounds).toBe(before);
      // Committed, it does: one round takes the work, the next finds none and sleeps.
      await notifyCommitted();
      await waitFor(() => work.rounds === before + 2, { what: 'the woken rounds' });
      expect(work.due).toBe(0);
    } finally {
      await stop();
    }
  });

  it('with wakeOn and a batch size, a round short of a full batch sleeps instead of claiming again', async () => {
    const { work, notifyCommitted, stop } = await countingWorker('polling_worker_batch', 3);
    try {
      const before = work.rounds;
      work.due = 2; // less than a batch: one round takes it all, and no empty round follows
      await notifyCommitted();
      await waitFor(() => work.rounds === before + 1, { what: 'the woken round' });
      await aMoment();
      expect([work.rounds, work.due]).toEqual([before + 1, 0]);
      work.due = 5; // a full batch means more may wait: rounds go on until one comes up short
      await notifyCommitted();
      await waitFor(() => work.due === 0, { what: 'the backlog taken' });
      await aMoment();
      expect(work.rounds).toBe(before + 3);
    } finally {
      await stop();
    }
  });
  it('runs again at once after a round that took all it had room for, however short of a batch', async () => {
    const { work, notifyCommitted, stop } = await countingWorker('polling_worker_room', 20, { room: 2 });
    try {
      const before = work.rounds;
      work.due = 7; // rounds of 2, 2, 2 and 1 (which says nothing more is due): no sleep between them
      await notifyCommitted();
      await waitFor(() => work.due === 0, { what: 'the backlog taken' });
      await aMoment();
      expect(work.rounds).toBe(before + 4);
    } finally {
      await stop();
    }
  });
});
