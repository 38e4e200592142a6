import { deleteQueues, redisUrl, uniqueName, waitFor } from '@idem/testkit';
import { FlowProducer, Queue, Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';

// BullMQ as idem installs it: patched (patches/README.md) so that a fetch wakes another worker only
// when a job is left to take. These tests fail on the unpatched release (the first), and show
// that no worker sleeps through a job it should have taken (the others): a wake-up missed would
// leave a job waiting for a worker's blocking wait to time out (DRAIN_DELAY_S).
const prefix = uniqueName('idem_test_fetch');
const redis = new Redis(redisUrl);
// BullMQ closes only the connections it made itself: the test closes the ones it hands over.
const handedOver: Redis[] = [];
const connection = () => {
  const client = new Redis(redisUrl, { maxRetriesPerRequest: null });
  handedOver.push(client);
  return client;
};
const DRAIN_DELAY_S = 5;

afterAll(async () => {
  await deleteQueues(prefix);
  for (const client of [redis, ...handedOver]) client.disconnect();
});

const markerOf = (queue: string) => redis.zcard(`${prefix}:${queue}:marker`);
/** What a waiting worker's blocking wait does when a job is added: it takes the marker. */
const wake = (queue: string) => redis.zpopmin(`${prefix}:${queue}:marker`);

describe('fetching a job (BullMQ, patched)', () => {
  it('leaves the wake-up marker set only while a job is left to take', async () => {
    const name = uniqueName('marker');
    const queue = new Queue(name, { connection: connection(), prefix });
    const worker = new Worker(name, null, { connection: connection(), prefix, autorun: false });
    try {
      await queue.add('job', { n: 1 });
      expect(await markerOf(name)).toBe(1);
      await wake(name);
      expect((await worker.getNextJob('token-1'))?.data).toEqual({ n: 1 });
      expect(await markerOf(name)).toBe(0); // nothing left: no worker is woken to find nothing

      await queue.addBulk([
        { name: 'job', data: { n: 2 } },
        { name: 'job', data: { n: 3 } },
      ]);
      await wake(name);
      expect((await worker.getNextJob('token-2'))?.data).toEqual({ n: 2 });
      expect(await markerOf(name)).toBe(1); // one left: the next worker is woken for it
    } finally {
      await worker.close();
      await queue.close();
    }
  });

  it('wakes a waiting worker for every job, one at a time and in bursts, across workers', async () => {
    const name = uniqueName('wakeups');
    const queue = new Queue(name, { connection: connection(), prefix });
    const startedAfterMs: number[] = [];
    const work = async (job: Job<{ ms: number }>) => {
      startedAfterMs.push(Date.now() - job.timestamp);
      await new Promise((resolve) => setTimeout(resolve, job.data.ms));
    };
    // Six slots in all. A burst of 18 jobs of 200 ms, added in one transaction (one wake-up for
    // the first worker; each fetch must wake the next), starts its last within ~400 ms when every
    // worker is woken; with one worker awake, the last would wait ~1.6 s.
    const flows = new FlowProducer({ connection: connection(), prefix });
    const workers = [1, 2, 3].map(
      () => new Worker(name, work, { connection: connection(), prefix, concurrency: 2, drainDelay: DRAIN_DELAY_S }),
    );
    try {
      await Promise.all(workers.map((worker) => worker.waitUntilReady()));
      for (let n = 0; n < 10; n++) {
        await queue.add('job', { ms: 15 });
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      await flows.addBulk(Array.from({ length: 18 }, () => ({ name: 'job', queueName: name, data: { ms: 200 } })));
      await waitFor(() => startedAfterMs.length === 28, { what: 'every job started' });
      expect(Math.max(...startedAfterMs)).toBeLessThan(1000);
    } finally {
      await Promise.all(workers.map((worker) => worker.close()));
      await Promise.all([queue.close(), flows.close()]);
    }
  });

  it('retries a failed job after its backoff: the delayed job still wakes a worker', async () => {
    const name = uniqueName('retry');
    const queue = new Queue(name, { connection: connection(), prefix });
    const attempts: number[] = [];
    const worker = new Worker(
      name,
      async () => {
        attempts.push(Date.now());
        if (attempts.length === 1) throw new Error('transient');
      },
      { connection: connection(), prefix, concurrency: 2, drainDelay: DRAIN_DELAY_S },
    );
    try {
      await worker.waitUntilReady();
      await queue.add('job', {}, { attempts: 2, backoff: { type: 'fixed', delay: 200 } });
      await waitFor(() => attempts.length === 2, { what: 'the retry' });
      expect(attempts[1]! - attempts[0]!).toBeLessThan(1500);
    } finally {
      await worker.close();
      await queue.close();
    }
  });
});
