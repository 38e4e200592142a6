import type { Catalogue, CatalogueSpec, ConsumerName, MessageOf } from '@idem/contracts';
import type { SqlClient, TransactionalClient } from '@idem/database';
import type { Faults } from '@idem/faults';
import {
  createInbox,
  createInboxRetention,
  replayHorizonMs,
  type DeadLetter,
  type Inbox,
  type InboxRetention,
  type MessageHandler,
  type Purge,
} from '@idem/inbox';
import { createRelay, listParked, purgePublished, retryParked, type ParkedRow, type RelayOptions } from '@idem/outbox';
import {
  replayDeadLetters,
  replayHorizonOf,
  type Consumer,
  type DeliveryReport,
  type Publisher,
  type ReplayFilter,
  type Transport,
} from '@idem/transport';

const DAY = 24 * 3_600_000;

/** Each consumer this service runs, by its name in the catalogue, with its handler. */
export type Handlers<Tx extends SqlClient, S extends CatalogueSpec> = {
  readonly [C in ConsumerName<S>]?: MessageHandler<Tx, MessageOf<S, C>>;
};

/** How long what the service keeps is kept, and how often the maintenance runs. */
export interface Retention {
  /**
   * Processed records: at least the replay horizon of the transport's policy (the time in which
   * a copy of a message can still arrive), or the start is refused (`RetentionError`).
   * @defaultValue the replay horizon plus one day
   */
  readonly inboxMs?: number;
  /** Published outbox rows (only with `relay`). @defaultValue 7 days */
  readonly outboxMs?: number;
  /** How often `maintain()` runs on its own; 0 never (call it yourself). @defaultValue one minute */
  readonly intervalMs?: number;
}

/** What `startIdem` runs: one service's database, catalogue and transport, and which of its parts. */
export interface IdemOptions<Tx extends SqlClient, S extends CatalogueSpec> {
  /** The service's database client: its business tables, the inbox's and the outbox's. */
  readonly db: TransactionalClient<Tx>;
  readonly catalogue: Catalogue<S>;
  /** The broker: `bullmq({ redisUrl })` of `@idem/messaging`, `rabbitmq({ url })` of `@idem/rabbitmq`. */
  readonly transport: Transport;
  /** The consumers to run, each through the inbox. @defaultValue none */
  readonly consumers?: Handlers<Tx, S>;
  /** Publish what the outbox holds (the relay), with these settings. @defaultValue false */
  readonly relay?: boolean | Omit<RelayOptions<Tx>, 'db' | 'publish' | 'faults' | 'onError'>;
  readonly retention?: Retention;
  /** How long after the fact a dead letter may be replayed: part of the replay horizon. @defaultValue 7 days */
  readonly replayWindowMs?: number;
  /** Deliveries each consumer handles at once; keep them within the database pool. @defaultValue 8 */
  readonly concurrency?: number;
  /** @defaultValue none fire */
  readonly faults?: Faults;
  readonly onDelivery?: (report: DeliveryReport) => void;
  readonly onRecorded?: (report: DeliveryReport) => void;
  /** What fails in the background: a consumer's connection, a relay batch, a maintenance run. */
  readonly onError?: (error: unknown) => void;
}

/** What one maintenance run removed: undefined for a part this service does not run. */
export interface Maintenance {
  readonly inbox?: Purge;
  readonly outboxDeleted?: number;
}

/** A running service: its inbox and publisher, its operator's actions, and its shutdown. */
export interface Idem<Tx extends SqlClient> {
  /** Resolves once every consumer subscribed and takes deliveries. */
  readonly ready: Promise<void>;
  readonly inbox: Inbox<Tx>;
  readonly publisher: Publisher;
  /** Removes the processed records and published outbox rows past their retention. */
  maintain(): Promise<Maintenance>;
  readonly deadLetters: {
    /** Dead letters not replayed yet, oldest first. */
    list(filter?: ReplayFilter): Promise<DeadLetter[]>;
    /**
     * Delivers them again to their consumer under their message id. Older than the replay window,
     * or kept truncated: refused unless forced with a reason.
     */
    replay(filter?: ReplayFilter, force?: { reason: string }): Promise<DeadLetter[]>;
  };
  readonly parked: {
    /** Outbox rows the relay parked after the broker kept refusing them. */
    list(limit?: number): Promise<ParkedRow[]>;
    /** Gives them (all, or these) back to the relay; returns how many. */
    retry(messageIds?: readonly string[]): Promise<number>;
  };
  /**
   * Stops in order: the consumers (finishing what they hold, up to `timeoutMs`, then leaving it
   * to redelivery), the relay, the maintenance, then the publisher.
   */
  stop(timeoutMs?: number): Promise<void>;
}

/**
 * Starts the Idempotent Consumer's parts of one service on `transport`: every consumer through the
 * inbox, the relay of its outbox, and the retention of both, its horizon derived from the policy
 * the transport really uses. A retention shorter than that horizon is refused before anything starts.
 */
export function startIdem<Tx extends SqlClient, S extends CatalogueSpec>(options: IdemOptions<Tx, S>): Idem<Tx> {
  const { db, catalogue, transport, faults, replayWindowMs = 7 * DAY } = options;
  const retention = inboxRetentionOf(options, replayWindowMs);
  const inbox = createInbox({ db, faults });
  const publisher = transport.createPublisher({ catalogue: catalogue as unknown as Catalogue, faults });
  const consumers = startConsumers(options, inbox);
  const relay = startRelay(options, publisher);
  const maintain = async (): Promise<Maintenance> => ({
    inbox: await retention?.purge(),
    outboxDeleted: relay
      ? await purgePublished(db, { retentionMs: options.retention?.outboxMs ?? 7 * DAY })
      : undefined,
  });
  const maintenance = every(options.retention?.intervalMs ?? 60_000, maintain, options.onError);
  return {
    ready: Promise.all(consumers.map((consumer) => consumer.ready)).then(() => undefined),
    inbox,
    publisher,
    maintain,
    deadLetters: {
      list: (filter) => inbox.deadLetters.list(filter),
      replay: (filter, force) => replayDeadLetters(inbox.deadLetters, publisher, filter, { replayWindowMs, force }),
    },
    parked: { list: (limit) => listParked(db, limit), retry: (messageIds) => retryParked(db, messageIds) },
    async stop(timeoutMs) {
      await Promise.all(consumers.map((consumer) => consumer.close(timeoutMs)));
      await relay?.stop();
      await maintenance.stop();
      await publisher.close();
    },
  };
}

/** The inbox's retention, checked against the replay horizon: only a service with consumers keeps records. */
function inboxRetentionOf<Tx extends SqlClient, S extends CatalogueSpec>(
  { db, transport, consumers = {}, retention }: IdemOptions<Tx, S>,
  replayWindowMs: number,
): InboxRetention | undefined {
  if (Object.keys(consumers).length === 0) return undefined;
  const horizon = replayHorizonOf(transport.policy, replayWindowMs);
  return createInboxRetention({ db, horizon, retentionMs: retention?.inboxMs ?? replayHorizonMs(horizon) + DAY });
}

function startConsumers<Tx extends SqlClient, S extends CatalogueSpec>(
  options: IdemOptions<Tx, S>,
  inbox: Inbox<Tx>,
): Consumer[] {
  const { catalogue, transport, consumers = {}, concurrency, faults, onDelivery, onRecorded, onError } = options;
  return Object.entries(consumers).map(([consumer, handler]) =>
    transport.startConsumer({
      catalogue,
      consumer: consumer as ConsumerName<S>,
      inbox,
      handler: handler as MessageHandler<Tx, MessageOf<S, ConsumerName<S>>>,
      concurrency,
      faults,
      onDelivery,
      onRecorded,
      onError,
    }),
  );
}

function startRelay<Tx extends SqlClient, S extends CatalogueSpec>(
  { db, relay, faults, onError }: IdemOptions<Tx, S>,
  publisher: Publisher,
) {
  if (!relay) return undefined;
  const running = createRelay({
    ...(relay === true ? {} : relay),
    db,
    publish: (envelopes) => publisher.publish(envelopes),
    faults,
    onError,
  });
  running.start();
  return running;
}

/** Runs `work` every `intervalMs`, one run at a time (a tick during a run is skipped); `stop` waits for the run under way. */
function every(intervalMs: number, work: () => Promise<unknown>, onError?: (error: unknown) => void) {
  let running: Promise<unknown> | undefined;
  const timer =
    intervalMs > 0
      ? setInterval(() => {
          running ??= work()
            .catch((error: unknown) => onError?.(error))
            .finally(() => (running = undefined));
        }, intervalMs)
      : undefined;
  timer?.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
