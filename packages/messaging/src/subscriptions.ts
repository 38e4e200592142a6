import type { AnyEnvelope, Catalogue } from '@idem/contracts';
import type { Faults } from '@idem/faults';
import { acceptedWithin, messageIdOf, subscriptionsOf, type DeliveryPolicy } from '@idem/transport';
import { Queue } from 'bullmq';
import { randomUUID } from 'node:crypto';
import { jobOptions } from './delivery-policy.js';
import { durableWrites, type DURABILITIES } from './durability.js';
import { createRedis, queueName, resolveBroker, whenReady, type BrokerOptions, type RedisClient } from './redis.js';

/**
 * Subscriptions owned by consumers, on Redis. A producer appends each message to its contract's
 * stream and knows nobody; a consumer reads the stream (`XREAD`: it can write nothing there) and
 * keeps its position — the last entry it forwarded — in a key of its own, so a consumer added
 * later receives what is published from then on, and no producer is redeployed. It forwards the
 * entries to its own BullMQ queue (a job under the message id, under its own delivery policy),
 * and only then moves its position: a forwarder that dies in between leaves the position where it
 * was, and the next forwards them again — a copy BullMQ's job id or the inbox absorbs. One
 * instance of a consumer forwards at a time (a lease); the others wait on the stream to take over.
 *
 *     <prefix>:stream:<contract>                where a producer publishes, one entry per message
 *     <prefix>:subscribers:<contract>           who subscribes: a set of consumer names
 *     <prefix>:position:<contract>:<consumer>   what that consumer forwarded: the last entry's id
 *     <prefix>:lease:<contract>:<consumer>      which instance of it forwards
 *     <prefix>:<consumer>:…                     the consumer's BullMQ queue, where its deliveries wait
 *
 * Who writes what: the producer its stream, and the positions and names of the consumers its
 * catalogue names, before its first append; a consumer its own position and lease, and its name to
 * the subscribers — the stream it only reads. No consumer can read as another, move another's
 * position or hold the stream for another (docs/operations.md "Redis users"). The producer trims
 * its stream to the oldest position of its subscribers, never the last minute; a consumer gone for
 * good holds entries until its position is removed (docs/scaling.md "Subscriptions on Redis").
 */
export const streamOf = (prefix: string, contract: string) => `${prefix}:stream:${contract}`;
/** Who subscribes to `contract`: a set of consumer names. */
export const subscribersOf = (prefix: string, contract: string) => `${prefix}:subscribers:${contract}`;
/** What `consumer` forwarded of `contract`'s stream: a hash of the last entry's `id` and the entries `read` up to it. */
export const positionOf = (prefix: string, contract: string, consumer: string) =>
  `${prefix}:position:${contract}:${consumer}`;
/** Which instance of `consumer` forwards `contract`'s stream, for how long yet. */
export const leaseOf = (prefix: string, contract: string, consumer: string) =>
  `${prefix}:lease:${contract}:${consumer}`;

/**
 * An entry's fields: the envelope, and on the copy the publish-twice fault sends, a mark that
 * gives its job an id of its own. Nothing else: how a job is retried and kept is its consumer's
 * policy, never its producer's.
 */
export const entryOf = (envelope: AnyEnvelope, copy = false) => [
  'envelope',
  JSON.stringify(envelope),
  ...(copy ? ['copy', '1'] : []),
];

/** A consumer's position on a stream: the last entry it forwarded, and how many the stream had added up to it. */
interface Position {
  readonly id: string;
  readonly read: number;
}

/** The end of a stream: its last entry's id, how many entries it ever added, how many it keeps. None when it does not exist. */
async function endOf(redis: RedisClient, stream: string) {
  const info = (await redis.xinfo('STREAM', stream).catch((error: unknown) => {
    if (/no such key/i.test((error as Error).message)) return undefined;
    throw error;
  })) as unknown[] | undefined;
  if (!info) return undefined;
  const field = (name: string) => info[info.indexOf(name) + 1];
  return {
    id: String(field('last-generated-id')),
    added: Number(field('entries-added')),
    length: Number(field('length')),
  };
}

/**
 * Subscribes `consumer` to `contract` unless it is: its position is where the stream ends now (a
 * new subscriber receives what is published from then on), or the stream's first entry kept for a
 * subscriber whose position was lost (removed, or gone with a failover: nothing skipped, the copies
 * absorbed), then it is added to the subscribers. Resolves to its position, and whether a producer
 * has declared the stream yet.
 */
export async function subscribe(
  redis: RedisClient,
  prefix: string,
  contract: string,
  consumer: string,
): Promise<{ served: boolean; from: Position }> {
  const subscribers = subscribersOf(prefix, contract);
  const end = await endOf(redis, streamOf(prefix, contract));
  const known = (await redis.sismember(subscribers, consumer)) === 1;
  const start = !end
    ? { id: '0-0', read: 0 }
    : known
      ? { id: '0-0', read: end.added - end.length }
      : { id: end.id, read: end.added };
  const position = positionOf(prefix, contract, consumer);
  const [id, read] = (await redis.eval(START, 1, position, start.id, start.read)) as [string, string];
  // Added once its position exists: a subscriber without one is nobody the producer waits for.
  await redis.sadd(subscribers, consumer);
  return { served: end !== undefined, from: { id, read: Number(read) } };
}

/** Writes a position unless there is one, and answers the one there is. */
const START = `if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'id', ARGV[1], 'read', ARGV[2])
end
return redis.call('HMGET', KEYS[1], 'id', 'read')`;

/**
 * Subscribes a consumer to its contracts (`Transport.subscribe`, and a consumer's start), on a
 * connection of its own: from then on what is published to them waits for it in their streams.
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
      if (!(await subscribe(redis, prefix, contract, options.consumer)).served) unserved.push(contract);
    return unserved;
  } finally {
    redis.disconnect();
  }
}

const SUBSCRIBE_TIMEOUT_MS = 10_000;

/** Entries of `contract`'s stream that `consumer` has not forwarded yet. */
export async function backlogOf(redis: RedisClient, prefix: string, contract: string, consumer: string) {
  const [end, [read]] = await Promise.all([
    endOf(redis, streamOf(prefix, contract)),
    redis.hmget(positionOf(prefix, contract, consumer), 'read'),
  ]);
  if (!end || read === null || read === undefined) return 0;
  return Math.min(Math.max(end.added - Number(read), 0), end.length);
}

/** Entry ids compared as Redis orders them (`<ms>-<seq>`). */
const olderThan = (a: string, b: string) => {
  const [ams, aseq] = a.split('-').map(BigInt);
  const [bms, bseq] = b.split('-').map(BigInt);
  return ams! < bms! || (ams === bms && aseq! < bseq!);
};

/**
 * How long a stream keeps its entries whatever the positions say: a subscriber reads where the
 * stream ends before its position exists, and what is appended meanwhile must still be there.
 */
const KEPT_AT_LEAST_MS = 60_000;

/**
 * Removes the entries of `contract`'s stream that no subscriber needs any more: those before the
 * oldest position, and older than a minute. A subscriber without a position (removed by an
 * operator, or one only a name was added for) holds nothing.
 */
export async function trimStream(redis: RedisClient, prefix: string, contract: string): Promise<void> {
  const stream = streamOf(prefix, contract);
  const [newest] = await redis.xrevrange(stream, '+', '-', 'COUNT', 1);
  if (!newest) return;
  let keep = `${Math.max(0, Number(newest[0].split('-')[0]) - KEPT_AT_LEAST_MS)}-0`;
  const subscribers = await redis.smembers(subscribersOf(prefix, contract));
  const positions = await Promise.all(
    subscribers.map((consumer) => redis.hget(positionOf(prefix, contract, consumer), 'id')),
  );
  for (const position of positions) if (position && olderThan(position, keep)) keep = position;
  await redis.xtrim(stream, 'MINID', keep);
}

/** What a forwarder needs: the subscription it forwards (a contract's stream, a consumer), the queue it writes, and how. */
export interface ForwarderOptions {
  readonly redisUrl: string;
  readonly prefix: string;
  readonly contract: string;
  readonly consumer: string;
  /** The consumer's own: how the jobs it forwards are retried and kept. */
  readonly policy: DeliveryPolicy;
  readonly faults: Faults;
  /**
   * How long an instance that stopped renewing its lease (it died) keeps forwarding to itself
   * before another instance takes over; also how long past its due a read, or a write, may go
   * unanswered before its connection is taken for dead and dropped.
   */
  readonly leaseMs: number;
  /** What forwarded jobs wait for before the position moves past their entries (durability.ts). */
  readonly durability: (typeof DURABILITIES)[number];
  readonly durabilityTimeoutMs: number;
  readonly onError: (error: unknown) => void;
}

/** The longest a read blocks: how often an idle forwarder renews its lease, or looks whether it may take it. */
const MAX_BLOCK_MS = 5_000;
const RETRY_MS = 1_000;
const BATCH = 100;

/** Takes the lease, or renews it: 1 when it is this holder's, 0 when another's. */
const HOLD = `local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`;
/** Lets the lease go, if it is still this holder's. */
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0`;

/**
 * Forwards what is published to one subscription to the consumer's queue, on a connection of its
 * own (it blocks on the stream): each entry becomes a job under its message id, and the position
 * moves past it only once the job is added, as durably as asked. The instance holding the lease
 * forwards; the others block on the stream too and, woken by an entry, look whether the lease is
 * free (released by an instance that stopped, or expired after one died). A command unanswered
 * `leaseMs` past its due (a dead link) drops the connection, and the next one opens another.
 */
export function startForwarder(options: ForwarderOptions): { close(): Promise<void> } {
  const { redisUrl, prefix, contract, consumer, policy, faults, leaseMs, onError } = options;
  const stream = streamOf(prefix, contract);
  const blockMs = Math.max(1, Math.min(MAX_BLOCK_MS, Math.floor(leaseMs / 3)));
  const lease = leaseFor(redisUrl, leaseOf(prefix, contract, consumer), { leaseMs, renewEveryMs: blockMs });
  const redis = createRedis(redisUrl, 'producer', blockMs + leaseMs);
  const queue = new Queue(queueName(consumer, redisUrl), { connection: redis, prefix });
  const writes = durableWrites(redis, options.durability, options.durabilityTimeoutMs);
  const answered = <T>(command: Promise<T>, dueMs = 0) =>
    acceptedWithin(command, dueMs + leaseMs, () => redis.disconnect(true));
  let running = true;
  /** Where it forwards from while it holds the lease; read again from Redis once it took it, or after a failure. */
  let from: Position | undefined;

  const read = async (id: string, count: number) => {
    const reply = (await answered(redis.xread('COUNT', count, 'BLOCK', blockMs, 'STREAMS', stream, id), blockMs)) as
      [string, [string, string[]][]][] | null;
    return reply?.[0]?.[1] ?? [];
  };
  const forward = async (position: Position, entries: [string, string[]][]): Promise<Position> => {
    await answered(queue.addBulk(entries.map((entry) => jobOf(entry, policy))));
    // As durable as a publication, or the position stays: forwarded again, never lost with a
    // master that took the jobs and died before its replica had them.
    await answered(writes.confirm([queue.toKey('id')]));
    faults.crashIf('crash-after-forward', consumer);
    const next = { id: entries.at(-1)![0], read: position.read + entries.length };
    await answered(redis.hset(positionOf(prefix, contract, consumer), 'id', next.id, 'read', next.read));
    return next;
  };

  const done = repeat(
    () => running,
    async () => {
      await whenReady(redis, blockMs + leaseMs);
      if (!(await answered(lease.holds(redis)))) {
        from = undefined;
        await read('$', 1); // another instance forwards: woken by the next entry, or a block later, to look again
        return;
      }
      from ??= (await answered(subscribe(redis, prefix, contract, consumer))).from;
      const entries = await read(from.id, BATCH);
      if (entries.length > 0) from = await forward(from, entries);
    },
    (error) => {
      onError(error);
      from = undefined; // what was not written down is forwarded again
    },
  );
  return {
    async close() {
      running = false;
      redis.disconnect(); // ends a blocked read at once
      await done;
      await queue.close().catch(() => {});
      await lease.release().catch(onError);
    },
  };
}

/**
 * An instance's lease on a subscription (`key`): taken or renewed by `holds`, at most once every
 * `renewEveryMs` (a lease with most of its time left needs no round trip); let go by `release`.
 */
function leaseFor(redisUrl: string, key: string, { leaseMs, renewEveryMs }: { leaseMs: number; renewEveryMs: number }) {
  const holder = randomUUID();
  let held = false;
  let renewedAt = 0;
  return {
    async holds(redis: RedisClient): Promise<boolean> {
      if (held && Date.now() - renewedAt < renewEveryMs) return true;
      held = (await redis.eval(HOLD, 1, key, holder, leaseMs)) === 1;
      if (held) renewedAt = Date.now();
      return held;
    },
    /**
     * On a connection of its own (the forwarder's was dropped to end its read): the next entry
     * wakes another instance, which takes over at once rather than once the lease expired.
     */
    async release(): Promise<void> {
      if (!held) return;
      const redis = createRedis(redisUrl, 'producer', leaseMs);
      try {
        await whenReady(redis, leaseMs);
        await acceptedWithin(redis.eval(RELEASE, 1, key, holder), leaseMs, () => redis.disconnect());
      } finally {
        redis.disconnect();
      }
    },
  };
}

/** Runs `step` again and again while `running()`; a step that fails is reported, and the next waits a second. */
async function repeat(running: () => boolean, step: () => Promise<void>, failed: (error: unknown) => void) {
  while (running()) {
    try {
      await step();
    } catch (error) {
      if (!running()) return;
      failed(error);
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    }
  }
}

/**
 * An entry as the job it is forwarded as, under the consumer's policy: the envelope (or the raw
 * text where it is not JSON: a dead letter, as it came), under its message id — the entry's own id
 * where it carries none —, a copy under an id of its own.
 */
function jobOf([entryId, fields]: [string, string[]], policy: DeliveryPolicy) {
  const field = (name: string) => {
    const at = fields.findIndex((value, index) => index % 2 === 0 && value === name);
    return at < 0 ? undefined : fields[at + 1];
  };
  const data = parsed(field('envelope') ?? '');
  const type = (data as { type?: unknown } | null)?.type;
  const messageId = messageIdOf(data, entryId);
  return {
    name: typeof type === 'string' ? type : 'unknown',
    data,
    opts: jobOptions(policy, field('copy') ? `${messageId}-again` : messageId),
  };
}

const parsed = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
};
