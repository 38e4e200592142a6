import { deleteQueues, redisUrl, uniqueName, waitFor } from '@idem/testkit';
import { FlowProducer, Queue, Worker, type Job } from 'bullmq';
import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';

// BullMQ as idem installs it: patched (patches/README.md) so that a fetch wakes another worker only
// when a job is left to take, and tells its own worker when nothing is left. The first two tests
// fail on the unpatched release; the others show that no worker sleeps through a job it should
// have taken: a wake-up missed would leave a job waiting for a worker's blocking wait to time out
// (DRAIN_DELAY_S).
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

/** A connection that counts the scripts run on it, by the name BullMQ defines each under. */
const countingScripts = () => {
  const client = connection();
  const nameOf = new Map<string, string>();
  const scripts: Record<string, number> = {};
  const defineCommand = client.defineCommand.bind(client);
  client.defineCommand = (name, definition) => {
    nameOf.set(createHash('sha1').update(definition.lua).digest('hex'), name.replace(/:[\d.]+$/, ''));
    defineCommand(name, definition);
  };
  const sendCommand = client.sendCommand.bind(client);
  client.sendCommand = (command, stream) => {
    const name = /^evalsha$/i.test(command.name) ? nameOf.get(String(command.args[0])) : undefined;
    if (name) scripts[name] = (scripts[name] ?? 0) + 1;
    return sendCommand(command, stream);
  };
  return { client, scripts };
};

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
      // The worker knows the queue was drained: it waits, and its wait takes the marker.
      expect((await worker.getNextJob('token-2'))?.data).toEqual({ n: 2 });
      expect(await markerOf(name)).toBe(1); // one left: the next worker is woken for it
    } finally {
      await worker.close();
      await queue.close();
    }
  });

  it('asks for a job once per delivery: after taking the last one, a worker waits instead of asking again', async () => {
    const name = uniqueName('fetches');
    const queue = new Queue(name, { connection: connection(), prefix });
    const counted = countingScripts();
    let done = 0;
    const worker = new Worker(name, async () => void done++, {
      connection: counted.client,
      prefix,
      concurrency: 4,
      drainDelay: DRAIN_DELAY_S,
    });
    try {
      await worker.waitUntilReady();
      await waitFor(() => counted.scripts.moveToActive === 1, { what: "the worker's first, empty fetch" });
      for (let n = 1; n <= 10; n++) {
        await queue.add('job', { n });
        await waitFor(() => done === n, { what: `job ${n} done` });
      }
      await new Promise((resolve) => setTimeout(resolve, 100)); // a fetch after the last would be seen
      // One fetch a job, plus the first; as published, each job's fetch was followed by an empty one (21).
      expect(counted.scripts.moveToActive).toBe(11);
      expect(counted.scripts.moveToFinished).toBe(10);
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
