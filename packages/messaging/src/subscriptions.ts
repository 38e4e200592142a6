import type { AnyEnvelope } from '@idem/contracts';
import type { Faults } from '@idem/faults';
import { acceptedWithin, type DeliveryPolicy } from '@idem/transport';
import { Queue, type JobsOptions } from 'bullmq';
import { jobOptions } from './delivery-policy.js';
import { durableWrites, type DURABILITIES } from './durability.js';
import type { Catalogue } from '@idem/contracts';
import { subscriptionsOf } from '@idem/transport';
import { createRedis, queueName, resolveBroker, whenReady, type BrokerOptions, type RedisClient } from './redis.js';

/**
 * Subscriptions owned by consumers, on Redis. A producer appends each message to its contract's
 * stream and knows nobody; a consumer's subscription is a consumer group of its own on that
 * stream, which it creates, so a consumer added later receives what is published from then on,
 * and no producer is redeployed. Each consumer forwards its group's entries to its own BullMQ
 * queue (a job under the message id), and only then acknowledges them in the stream: a forwarder
 * that dies in between leaves them pending, and another forwards them again — a copy BullMQ's
 * job id or the inbox absorbs.
 *
 *     <prefix>:stream:<contract>   stream: where a producer publishes, one entry per message
 *       group <consumer>           a subscription: what the consumer has not forwarded yet
 *     <prefix>:<consumer>:…        the consumer's BullMQ queue, where its deliveries wait
 *
 * The producer trims its streams to what every group still needs; a group of a consumer that is
 * gone for good holds entries until it is removed (`XGROUP DESTROY`).
 */
export const streamOf = (prefix: string, contract: string) => `${prefix}:stream:${contract}`;

/**
 * An entry's fields: the options of the job it is forwarded as (its id — the message id, or a
 * fault's copy —, retries and retention: the publisher's delivery policy, as before there were
 * streams), and the envelope.
 */
export const entryOf = (options: JobsOptions, envelope: AnyEnvelope) => [
  'job',
  JSON.stringify(options),
  'envelope',
  JSON.stringify(envelope),
];

/** Where a group reads from when it is created: what is published from then on. */
const FROM_NOW = '$';
/** The one name every instance of a consumer reads its group under: entries pending under it are anyone's to forward again. */
const FORWARDER = 'forwarder';

/** Creates `consumer`'s group on `stream` unless it exists (the stream too); says whether the stream existed. */
export async function subscribe(redis: RedisClient, stream: string, consumer: string): Promise<boolean> {
  const existed = (await redis.exists(stream)) === 1;
  await redis.xgroup('CREATE', stream, consumer, FROM_NOW, 'MKSTREAM').catch((error: unknown) => {
    if (!/BUSYGROUP/.test((error as Error).message)) throw error;
  });
  return existed;
}

/**
 * Creates a consumer's subscriptions (`Transport.subscribe`, and a consumer's start), on a
 * connection of its own: from then on what is published to its contracts waits in its groups.
 * Resolves to the contracts whose stream no producer had declared yet.
 */
export async function subscribeConsumer(
  options: BrokerOptions & { readonly catalogue: Catalogue; readonly consumer: string },
): Promise<string[]> {
  const { redisUrl, prefix } = resolveBroker(options);
  const redis = createRedis(redisUrl, 'producer', SUBSCRIBE_TIMEOUT_MS);
  try {
    await whenReady(redis, SUBSCRIBE_TIMEOUT_MS);
    const unserved: string[] = [];
    for (const contract of subscriptionsOf(options.catalogue, options.consumer))
      if (!(await subscribe(redis, streamOf(prefix, contract), options.consumer))) unserved.push(contract);
    return unserved;
  } finally {
    redis.disconnect();
  }
}

const SUBSCRIBE_TIMEOUT_MS = 10_000;

/** Entries of `consumer`'s group on `stream` it has not forwarded: read by none, or read and not acknowledged. */
export async function backlogOf(redis: RedisClient, stream: string, consumer: string): Promise<number> {
  const group = (await groupsOf(redis, stream)).find(({ name }) => name === consumer);
  if (!group) return 0;
  const unread = group.lag ?? (await redis.xrange(stream, `(${group.lastDelivered}`, '+', 'COUNT', 10_000)).length;
  return group.pending + unread;
}

interface Group {
  readonly name: string;
  readonly pending: number;
  readonly lastDelivered: string;
  /** Entries not yet read by the group, where Redis can tell. */
  readonly lag: number | null;
}

/** The groups on `stream` (none when it does not exist). */
async function groupsOf(redis: RedisClient, stream: string): Promise<Group[]> {
  const groups = (await redis.xinfo('GROUPS', stream).catch((error: unknown) => {
    if (/no such key/i.test((error as Error).message)) return [];
    throw error;
  })) as unknown[][];
  return groups.map((fields) => {
    const field = (name: string) => fields[fields.indexOf(name) + 1];
    const lag = field('lag');
    return {
      name: String(field('name')),
      pending: Number(field('pending')),
      lastDelivered: String(field('last-delivered-id')),
      lag: lag === null || lag === undefined ? null : Number(lag),
    };
  });
}

/** Entry ids compared as Redis orders them (`<ms>-<seq>`). */
const olderThan = (a: string, b: string) => {
  const [ams, aseq] = a.split('-').map(BigInt);
  const [bms, bseq] = b.split('-').map(BigInt);
  return ams! < bms! || (ams === bms && aseq! < bseq!);
};

/**
 * Removes the entries of `stream` that no group needs any more: those before the oldest entry a
 * group has pending, or has not read yet. A group created meanwhile reads from its creation on,
 * after all of them; with no group at all, everything up to the newest entry seen is dropped.
 */
export async function trimStream(redis: RedisClient, stream: string): Promise<void> {
  const [newest] = await redis.xrevrange(stream, '+', '-', 'COUNT', 1);
  if (!newest) return;
  let keep = newest[0];
  for (const group of await groupsOf(redis, stream)) {
    const needed =
      group.pending > 0 ? String(((await redis.xpending(stream, group.name)) as unknown[])[1]) : group.lastDelivered;
    if (olderThan(needed, keep)) keep = needed;
  }
  await redis.xtrim(stream, 'MINID', keep);
}

/** What a forwarder needs: the stream and group it reads, the queue it writes, and how. */
export interface ForwarderOptions {
  readonly redisUrl: string;
  readonly prefix: string;
  readonly stream: string;
  readonly consumer: string;
  readonly policy: DeliveryPolicy;
  readonly faults: Faults;
  /**
   * How long an entry stays pending before it is taken for abandoned (its forwarder died) and
   * forwarded again; also how often that is looked for, and how long past its block a read, or a
   * write, may go unanswered before its connection is taken for dead and dropped.
   */
  readonly claimIdleMs: number;
  /** What forwarded jobs wait for before their entries are acknowledged (durability.ts). */
  readonly durability: (typeof DURABILITIES)[number];
  readonly durabilityTimeoutMs: number;
  readonly onError: (error: unknown) => void;
}

const BLOCK_MS = 1_000;
const BATCH = 100;

/**
 * Forwards what is published to one subscription to the consumer's queue, on a connection of
 * its own (it blocks on the stream): each entry becomes a job under its id, and is acknowledged
 * in the stream only once the job was added. Entries left pending — by a forwarder that died, or
 * read on a connection that died — are claimed once idle `claimIdleMs`, at once after a dropped
 * connection. A command unanswered `claimIdleMs` past its due (a dead link) drops the connection,
 * and the next one opens another.
 */
export function startForwarder(options: ForwarderOptions): { close(): Promise<void> } {
  const { redisUrl, prefix, stream, consumer, policy, faults, claimIdleMs, onError } = options;
  const redis = createRedis(redisUrl, 'producer', BLOCK_MS + claimIdleMs);
  const queue = new Queue(queueName(consumer, redisUrl), { connection: redis, prefix });
  const writes = durableWrites(redis, options.durability, options.durabilityTimeoutMs);
  const answered = <T>(command: Promise<T>, dueMs = 0) =>
    acceptedWithin(command, dueMs + claimIdleMs, () => redis.disconnect(true));
  let running = true;
  let claimedAt = 0;

  const forward = async (entries: [string, string[] | null][]) => {
    // An entry trimmed while pending comes back empty: nothing to forward, acknowledged.
    const found = entries.filter((entry): entry is [string, string[]] => entry[1] !== null);
    if (found.length > 0) {
      await answered(queue.addBulk(found.map((entry) => jobOf(entry, policy))));
      // As durable as a publication, or the entries stay pending: forwarded again, never lost
      // with a master that took the jobs and died before its replica had them.
      await answered(writes.confirm([queue.toKey('id')]));
    }
    if (entries.length === 0) return;
    faults.crashIf('crash-after-forward', consumer);
    await answered(redis.xack(stream, consumer, ...entries.map(([id]) => id)));
  };
  const claim = async () => {
    if (Date.now() - claimedAt < claimIdleMs) return;
    let cursor = '0-0';
    do {
      const [next, entries] = (await answered(
        redis.xautoclaim(stream, consumer, FORWARDER, claimIdleMs, cursor, 'COUNT', BATCH),
      )) as [string, [string, string[] | null][]];
      await forward(entries);
      cursor = next;
    } while (running && cursor !== '0-0');
    claimedAt = Date.now();
  };
  const read = async () => {
    const options = ['COUNT', BATCH, 'BLOCK', BLOCK_MS, 'STREAMS', stream, '>'] as const;
    const read = redis.xreadgroup('GROUP', consumer, FORWARDER, ...options);
    const streams = (await answered(read, BLOCK_MS)) as [string, [string, string[]][]][] | null;
    await forward(streams?.[0]?.[1] ?? []);
  };

  const done = repeat(
    () => running,
    async () => {
      await whenReady(redis, BLOCK_MS + claimIdleMs);
      await claim();
      await read();
    },
    (error) => {
      onError(error);
      claimedAt = 0; // what the lost connection read is pending: claimed on the next one
    },
  );
  return {
    async close() {
      running = false;
      redis.disconnect(); // ends a blocked read at once
      await done;
      await queue.close().catch(() => {});
    },
  };
}

/** Runs `step` again and again while `running()`; a step that fails is reported, and the next waits a block. */
async function repeat(running: () => boolean, step: () => Promise<void>, failed: (error: unknown) => void) {
  while (running()) {
    try {
      await step();
    } catch (error) {
      if (!running()) return;
      failed(error);
      await new Promise((resolve) => setTimeout(resolve, BLOCK_MS));
    }
  }
}

/**
 * An entry as the job it is forwarded as: what the producer wrote, or the raw text where it is not
 * JSON (a dead letter, as it came); under the consumer's own policy where it names no job options.
 */
function jobOf([id, fields]: [string, string[]], policy: DeliveryPolicy) {
  const field = (name: string) => fields[fields.indexOf(name) + 1] ?? '';
  const data = parsed(field('envelope'));
  const options = parsed(field('job'));
  const type = (data as { type?: unknown } | null)?.type;
  return {
    name: typeof type === 'string' ? type : 'unknown',
    data,
    opts: typeof options === 'object' && options !== null ? (options as JobsOptions) : jobOptions(policy, id),
  };
}

const parsed = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
};
