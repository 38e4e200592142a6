import type { AnyEnvelope, Catalogue, CatalogueSpec, ConsumerName, MessageOf } from '@idem/contracts';
import type { SqlClient, TransactionalClient } from '@idem/database';
import { noFaults, type Faults } from '@idem/faults';
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
import {
  createPooledRelay,
  createRelay,
  handoffFor,
  listParked,
  purgePublished,
  retryParked,
  type HandoffOptions,
  type ParkedRow,
  type RelayOptions,
} from '@idem/outbox';
import {
  replayDeadLetters,
  replayHorizonOf,
  type Consumer,
  type DeliveryReport,
  type Publisher,
  type PublisherOptions,
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
  /** The span of message times one partition of the processed records covers. @defaultValue one day */
  readonly inboxPartitionSpanMs?: number;
  /** How often `maintain()` runs on its own; 0 never (call it yourself). @defaultValue one minute */
  readonly intervalMs?: number;
}

/** How the outbox is published: the relay's settings, and the handoff after commit. */
export interface RelaySettings<Tx extends SqlClient> extends Omit<RelayOptions<Tx>, 'db' | 'publish' | 'faults'> {
  /**
   * The relay's batches on a pool of their own, on `databaseUrl`: while they wait for the broker
   * they hold its connections, so a broker outage never holds the service's. @defaultValue false
   */
  readonly ownPool?: boolean;
  /**
   * Also publish each transaction's events right after its commit (`db` must run work after
   * commit); the relay publishes what the handoff leaves (a crash, a broker refusal). @defaultValue false
   */
  readonly handoff?: boolean | Pick<HandoffOptions, 'sweepAfterMs' | 'markAfterMs' | 'onError' | 'onPublished'>;
}

/** Which of the service's parts this process runs: a service split across processes runs each part in its own. */
export interface Runs {
  /** @defaultValue true */
  readonly consumers?: boolean;
  /** The relay and the handoff. @defaultValue true */
  readonly relay?: boolean;
  /** `maintain()` on its timer. @defaultValue true */
  readonly maintenance?: boolean;
}

/** What `startIdem` runs: one service's database, catalogue and transport, and which of its parts. */
export interface IdemOptions<Tx extends SqlClient, S extends CatalogueSpec, P extends Publisher = Publisher> {
  /** The service's database client: its business tables, the inbox's and the outbox's. */
  readonly db: TransactionalClient<Tx>;
  readonly catalogue: Catalogue<S>;
  /** The broker: `bullmq({ redisUrl })` of `@idem/messaging`, `rabbitmq({ url })` of `@idem/rabbitmq`. */
  readonly transport: Transport<P>;
  /** The service's consumers, each through the inbox; the inbox's retention is kept when it has any. @defaultValue none */
  readonly consumers?: Handlers<Tx, S>;
  /** Publish what the outbox holds (the relay), with these settings. @defaultValue false */
  readonly relay?: boolean | RelaySettings<Tx>;
  /** The parts this process runs, of those the options above declare. @defaultValue all */
  readonly run?: Runs;
  readonly retention?: Retention;
  /** How long after the fact a dead letter may be replayed: part of the replay horizon. @defaultValue 7 days */
  readonly replayWindowMs?: number;
  /** Deliveries each consumer handles at once; keep them within the database pool. @defaultValue 8 */
  readonly concurrency?: number;
  /** @defaultValue none fire */
  readonly faults?: Faults;
  /** The clock of the inbox, its retention and the handoff. @defaultValue () => new Date() */
  readonly now?: () => Date;
  readonly onDelivery?: (report: DeliveryReport) => void;
  readonly onRecorded?: (report: DeliveryReport) => void;
  /** Told of every publication once the broker took it (a journal). */
  readonly onPublished?: PublisherOptions['onPublished'];
  /** After every maintenance run on the timer, with what it removed. */
  readonly onMaintained?: (maintenance: Maintenance) => void;
  /**
   * What fails in the background, and where: a consumer's name (its connection, a dead-letter
   * write), `relay`, `handoff` or `maintenance`.
   */
  readonly onError?: (error: unknown, part: string) => void;
}

/** What one maintenance run removed: undefined for a part this service does not run. */
export interface Maintenance {
  readonly inbox?: Purge;
  readonly outboxDeleted?: number;
}

/** A running service: its inbox and publisher, its operator's actions, and its shutdown. */
export interface Idem<Tx extends SqlClient, P extends Publisher = Publisher> {
  /** Resolves once every consumer subscribed and takes deliveries. */
  readonly ready: Promise<void>;
  readonly inbox: Inbox<Tx>;
  readonly publisher: P;
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
   * to redelivery), the handoff and the relay, the maintenance, then the publisher.
   */
  stop(timeoutMs?: number): Promise<void>;
}

/**
 * Starts the Idempotent Consumer's parts of one service on `transport`: every consumer through the
 * inbox, the relay of its outbox, and the retention of both, its horizon derived from the policy
 * the transport really uses. A retention shorter than that horizon is refused before anything starts.
 */
export function startIdem<Tx extends SqlClient, S extends CatalogueSpec, P extends Publisher = Publisher>(
  options: IdemOptions<Tx, S, P>,
): Idem<Tx, P> {
  const { db, catalogue, transport, faults, now, onPublished, onError, replayWindowMs = 7 * DAY } = options;
  const run = { consumers: true, relay: true, maintenance: true, ...options.run };
  const retention = inboxRetentionOf(options, replayWindowMs);
  const inbox = createInbox({ db, faults, now });
  // A publication fails, and its connection is dropped, when the relay would fail it.
  const timeoutMs = typeof options.relay === 'object' ? options.relay.publishTimeoutMs : undefined;
  const publisher = transport.createPublisher({
    catalogue: catalogue as unknown as Catalogue,
    faults,
    onPublished,
    timeoutMs,
  });
  const consumers = run.consumers ? startConsumers(options, inbox) : [];
  const relay = run.relay ? startRelay(options, publisher) : undefined;
  const maintain = async (): Promise<Maintenance> => ({
    inbox: await retention?.purge(),
    outboxDeleted: options.relay
      ? await purgePublished(db, { retentionMs: options.retention?.outboxMs ?? 7 * DAY, now: now?.() })
      : undefined,
  });
  const maintenance = every(
    run.maintenance ? (options.retention?.intervalMs ?? 60_000) : 0,
    async () => {
      const done = await maintain(); // not inside `onMaintained?.(…)`, which skips its argument when unset
      options.onMaintained?.(done);
    },
    (error) => onError?.(error, 'maintenance'),
  );
  const ready = Promise.all(consumers.map((consumer) => consumer.ready)).then(() => undefined);
  ready.catch(() => {}); // each consumer tells onError why it did not start
  return {
    ready,
    inbox,
    publisher,
    maintain,
    deadLetters: {
      list: (filter) => inbox.deadLetters.list(filter),
      replay: (filter, force) => replayDeadLetters(inbox.deadLetters, publisher, filter, { replayWindowMs, force }),
    },
    parked: { list: (limit) => listParked(db, limit), retry: (messageIds) => retryParked(db, messageIds) },
    async stop(timeoutMs) {
      // Every part stopped, whatever another's stop did: a consumer whose close failed leaves no
      // relay or publisher running. The first failure is thrown once all are done.
      const stopped = await Promise.allSettled(consumers.map((consumer) => consumer.close(timeoutMs)));
      for (const stop of [() => relay?.stop(), () => maintenance.stop(), () => publisher.close()])
        stopped.push(...(await Promise.allSettled([stop()])));
      const failed = stopped.find((result) => result.status === 'rejected');
      if (failed) throw failed.reason;
    },
  };
}

/** The inbox's retention, checked against the replay horizon: only a service with consumers keeps records. */
function inboxRetentionOf<Tx extends SqlClient, S extends CatalogueSpec, P extends Publisher>(
  { db, transport, consumers = {}, retention, now }: IdemOptions<Tx, S, P>,
  replayWindowMs: number,
): InboxRetention | undefined {
  if (Object.keys(consumers).length === 0) return undefined;
  const horizon = replayHorizonOf(transport.policy, replayWindowMs);
  return createInboxRetention({
    db,
    horizon,
    retentionMs: retention?.inboxMs ?? replayHorizonMs(horizon) + DAY,
    partitionSpanMs: retention?.inboxPartitionSpanMs,
    now,
  });
}

function startConsumers<Tx extends SqlClient, S extends CatalogueSpec, P extends Publisher>(
  options: IdemOptions<Tx, S, P>,
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
      onError: (error) => onError?.(error, consumer),
    }),
  );
}

/** The relay (on its own pool, if asked) and the handoff; stopping stops the handoff first, whose leftovers the relay takes. */
function startRelay<Tx extends SqlClient, S extends CatalogueSpec, P extends Publisher>(
  { db, relay: settings, faults, now, onError }: IdemOptions<Tx, S, P>,
  publisher: Publisher,
) {
  if (!settings) return undefined;
  const { ownPool, handoff: handing, ...options } = settings === true ? {} : settings;
  const publish = (envelopes: AnyEnvelope[]) => publisher.publish(envelopes);
  const relayOptions = { onError: (error: unknown) => onError?.(error, 'relay'), ...options, publish, faults };
  const relay =
    ownPool && options.databaseUrl
      ? createPooledRelay({ ...relayOptions, databaseUrl: options.databaseUrl })
      : createRelay({ ...relayOptions, db });
  const handoff = handing ? handoffFor(db) : undefined;
  handoff?.start({
    onError: (error) => onError?.(error, 'handoff'),
    ...(handing === true ? {} : handing),
    publish,
    name: options.name ? `${options.name}.handoff` : 'handoff',
    faults: faults ?? noFaults,
    now: now ?? (() => new Date()),
  });
  relay.start();
  return {
    async stop() {
      await handoff?.stop();
      await relay.stop();
    },
  };
}

/** Runs `work` every `intervalMs`, one run at a time (a tick during a run is skipped); `stop` waits for the run under way. */
function every(intervalMs: number, work: () => Promise<unknown>, onError: (error: unknown) => void) {
  let running: Promise<unknown> | undefined;
  const timer =
    intervalMs > 0
      ? setInterval(() => {
          running ??= work()
            .catch(onError)
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
