import { isConsumerNameForm, type Catalogue } from '@idem/contracts';
import { defaultDeliveryPolicy, subscriptionsOf, type DeliveryPolicy } from '@idem/transport';
import { ReplyError } from 'ioredis';
import { createRedis, queueName, resolveBroker, whenReady, type BrokerOptions, type RedisClient } from './redis.js';

/**
 * Subscriptions owned by consumers, on Redis. A consumer subscribes by writing, beside its queue,
 * what it takes and how (its subscription: the contracts and its delivery policy), and adding its
 * name to the subscribers of each of those contracts; a producer reads a contract's subscribers at
 * each publication and adds the message to each one's queue, under its message id and that
 * subscriber's policy — the one write per queue a fan-out takes, no hop in between. A consumer
 * added later receives the next publication, and no producer is redeployed; what was published
 * before it subscribed it never receives.
 *
 *     <prefix>:subscribers:<contract>         who subscribes: a set of consumer names
 *     <prefix>:<consumer>:idem:subscription   what that consumer takes, and how its deliveries are retried and kept (JSON)
 *     <prefix>:<consumer>:…                   the consumer's BullMQ queue, where its deliveries wait
 *
 * Who writes what: a producer the subscribers of its contracts (the consumers its catalogue names,
 * before its first publication, so none misses one for having started later) and the queues of
 * their subscribers; a consumer its own queue and subscription, and its name to the subscribers of
 * what it takes — only add it: it removes nobody (docs/operations.md "Redis users"). A name in the
 * subscribers is believed only where the catalogue, or that consumer's own subscription, says it
 * takes the contract: a name added by another reaches nobody's queue.
 */
export const subscribersOf = (prefix: string, contract: string) => `${prefix}:subscribers:${contract}`;
/** Where `queue` (a consumer's, as `queueName` names it) keeps its subscription: the contracts it takes, and its delivery policy. */
export const subscriptionOf = (prefix: string, queue: string) => `${prefix}:${queue}:idem:subscription`;

/** A consumer's subscription as it writes it beside its queue. */
interface Subscription {
  readonly contracts: readonly string[];
  readonly policy: DeliveryPolicy;
}

/**
 * Subscribes a consumer to its contracts (`Transport.subscribe`, and a consumer's start), on a
 * connection of its own: its subscription written, its name added to each contract's subscribers,
 * from then on what is published to them waits for it in its queue. Resolves to the contracts
 * nobody had declared yet (no producer, no other subscriber).
 */
export async function subscribeConsumer(
  options: BrokerOptions & {
    readonly catalogue: Catalogue;
    readonly consumer: string;
    readonly policy?: DeliveryPolicy;
  },
): Promise<string[]> {
  const { redisUrl, prefix } = resolveBroker(options);
  const { consumer, policy = defaultDeliveryPolicy } = options;
  const contracts = subscriptionsOf(options.catalogue, consumer);
  const redis = createRedis(redisUrl, 'producer', SUBSCRIBE_TIMEOUT_MS);
  try {
    await whenReady(redis, SUBSCRIBE_TIMEOUT_MS);
    // The subscription first: a producer that meets the name meets what it takes too.
    const subscription: Subscription = { contracts, policy };
    await redis.set(subscriptionOf(prefix, queueName(consumer, redisUrl)), JSON.stringify(subscription));
    const unserved: string[] = [];
    for (const contract of contracts) {
      const subscribers = subscribersOf(prefix, contract);
      if ((await redis.exists(subscribers)) === 0) unserved.push(contract);
      await redis.sadd(subscribers, consumer);
    }
    return unserved;
  } finally {
    redis.disconnect();
  }
}

const SUBSCRIBE_TIMEOUT_MS = 10_000;

/**
 * How long a producer uses a subscriber's subscription before it reads it again: a new policy
 * reaches the producers within it. A name new among a contract's subscribers is read at once.
 */
const SUBSCRIPTION_READ_EVERY_MS = 10_000;

/**
 * How soon a subscription that lacks a contract, of a name among that contract's subscribers, is
 * read again: a consumer that takes a contract again (its name still there from before), or whose
 * name another subscriber added first, receives what is published from at most this long after.
 */
const LACKING_READ_EVERY_MS = 1_000;

/**
 * The most names a producer takes from a contract's subscribers at a publication. Any subscriber
 * may add names to them (never remove one); beyond this many, the producer keeps the subscribers it
 * knew before and takes no new one until an operator removes the names nobody uses, and says so
 * on its send spans (docs/operations.md "Redis users").
 */
export const MOST_SUBSCRIBERS = 512;

/** What a producer notes of a subscriber it leaves out: an event on each send span. */
export type Note = (event: string, attributes: Record<string, string | number>) => void;

/**
 * What a producer knows of its contracts' subscribers: who they are, read at every publication
 * (a round trip, the contracts of a batch asked together), and their subscriptions, read when a
 * name is new among a contract's subscribers and again every {@link SUBSCRIPTION_READ_EVERY_MS}
 * ms (one that lacks a contract it is among the subscribers of, every
 * {@link LACKING_READ_EVERY_MS} ms). `declare` adds the consumers the producer's catalogue names,
 * once, before its first publication; those it delivers to whatever their subscription says (one that wrote none, or
 * none it can read, gets the producer's `fallback` policy). Another name it delivers to only where
 * that consumer's own subscription takes the contract, and only a consumer's name (no `:`, so no
 * key of another's: a subscriber cannot invent queues under its own).
 */
export function subscribersFor(
  redis: RedisClient,
  { prefix, redisUrl, fallback }: { prefix: string; redisUrl: string; fallback: DeliveryPolicy },
) {
  const declared = new Map<string, Promise<void>>();
  const known = new Map<string, { subscription: Subscription | undefined; readAt: number }>();
  /** Each contract's subscribers as the last publication found them. */
  const listed = new Map<string, ReadonlySet<string>>();
  const declare = (contract: string, consumers: readonly string[]) => {
    let done = declared.get(contract);
    if (!done) {
      done = redis.sadd(subscribersOf(prefix, contract), ...consumers).then(() => undefined);
      declared.set(contract, done);
      done.catch(() => declared.delete(contract)); // declared again next time
    }
    return done;
  };
  const list = async (contract: string, note: Note): Promise<ReadonlySet<string>> =>
    (await subscribersIn(redis, subscribersOf(prefix, contract), note)) ?? listed.get(contract) ?? new Set();
  const read = async (consumers: readonly string[], note: Note) => {
    const keys = consumers.map((consumer) => subscriptionOf(prefix, queueName(consumer, redisUrl)));
    const subscriptions = await subscriptionsIn(redis, keys, note);
    consumers.forEach((consumer, i) => known.set(consumer, { subscription: subscriptions[i], readAt: Date.now() }));
  };
  const stale = (consumer: string, afterMs: number) =>
    (known.get(consumer)?.readAt ?? -Infinity) < Date.now() - afterMs;
  const takes = (consumer: string, contract: string) =>
    known.get(consumer)?.subscription?.contracts.includes(contract) ?? false;
  return {
    /**
     * The subscribers of each contract — those `named` (the catalogue's) and those that subscribed
     * themselves — and the policy of each; what it leaves out, noted.
     */
    async of(named: ReadonlyMap<string, readonly string[]>, note: Note) {
      await Promise.all([...named].map(([contract, consumers]) => declare(contract, consumers)));
      const contracts = [...named.keys()];
      const members = await Promise.all(contracts.map((contract) => list(contract, note)));
      // A name whose subscription lacks a contract it is among the subscribers of may have
      // subscribed to it since: read at once where the name is new there, else now and then.
      const lacking = [...named].flatMap(([contract, consumers], i) =>
        [...members[i]!].filter(
          (name) =>
            !consumers.includes(name) &&
            !takes(name, contract) &&
            (!listed.get(contract)?.has(name) || stale(name, LACKING_READ_EVERY_MS)),
        ),
      );
      contracts.forEach((contract, i) => listed.set(contract, members[i]!));
      const all = [...new Set([...named.values(), ...members.map((names) => [...names])].flat())];
      await read([...new Set([...all.filter((name) => stale(name, SUBSCRIPTION_READ_EVERY_MS)), ...lacking])], note);
      const subscribers = new Map(
        [...named].map(
          ([contract, consumers], i) =>
            [contract, [...new Set([...consumers, ...[...members[i]!].filter((c) => takes(c, contract))])]] as const,
        ),
      );
      const policies = new Map(all.map((c) => [c, known.get(c)?.subscription?.policy ?? fallback]));
      return { subscribers, policies };
    },
  };
}

/**
 * The names in a contract's subscribers `key` that have a consumer name's form, in one SSCAN;
 * none where there are more than {@link MOST_SUBSCRIBERS}, which it notes.
 */
async function subscribersIn(redis: RedisClient, key: string, note: Note): Promise<Set<string> | undefined> {
  const [cursor, names] = await redis.sscan(key, 0, 'COUNT', MOST_SUBSCRIBERS);
  if (cursor === '0') return new Set(names.filter(isConsumerNameForm));
  note('subscribers beyond the most read', { 'idem.subscribers': key, 'idem.most': MOST_SUBSCRIBERS });
  return undefined;
}

/**
 * The subscriptions at `keys`, one key each, in as many slots of a cluster: sent together, not as
 * one pipeline. A key Redis refuses (out of the producer's reach, or no string) is no
 * subscription, noted; a lost connection fails the publication.
 */
function subscriptionsIn(redis: RedisClient, keys: readonly string[], note: Note) {
  return Promise.all(
    keys.map(async (key) => {
      try {
        return subscriptionFrom(await redis.get(key));
      } catch (error) {
        if (!(error instanceof ReplyError)) throw error;
        note('subscription unread', { 'idem.subscription': key, 'exception.message': (error as Error).message });
        return undefined;
      }
    }),
  );
}

/** A subscription as a consumer wrote it; none where it wrote none, or one that is not a subscription. */
function subscriptionFrom(text: unknown): Subscription | undefined {
  if (typeof text !== 'string') return undefined;
  try {
    const { contracts, policy } = JSON.parse(text) as { contracts?: unknown; policy?: Record<string, unknown> };
    const whole =
      Array.isArray(contracts) &&
      contracts.every((contract) => typeof contract === 'string') &&
      (['attempts', 'backoffDelayMs', 'keepCompletedMs', 'keepFailedMs'] as const).every(
        (key) => Number.isSafeInteger(policy?.[key]) && (policy![key] as number) >= (key === 'attempts' ? 1 : 0),
      );
    return whole ? ({ contracts, policy } as unknown as Subscription) : undefined;
  } catch {
    return undefined;
  }
}
