/**
 * Publish right after commit. A transaction that enqueues events hands them to the broker as soon
 * as it commits, and marks them published; the relay only sweeps what is left — rows of a writer
 * that crashed between its commit and its publication, or whose publication failed. Rows written
 * for a handoff come due for the relay `sweepAfterMs` after they were written (and wake no relay),
 * so a writer and the relay publish one row twice only when a handoff is that late: the accepted
 * duplicate, which every consumer's inbox suppresses, as after a relay's crash between publish
 * and mark. (MassTransit's, NServiceBus's and Wolverine's outboxes work the same way.)
 */
import type { AnyEnvelope } from '@idem/contracts';
import type { SqlClient, TransactionalClient } from '@idem/database';
import { noFaults, type Faults } from '@idem/faults';

/** What a handoff needs to publish: the broker, and how it reports. */
export interface HandoffOptions {
  /** Publishes events to the broker; resolves only when the broker has accepted all of them. */
  readonly publish: (envelopes: AnyEnvelope[]) => Promise<void>;
  /** A failed publication or mark: the rows stay for the relay. */
  readonly onError?: (error: unknown) => void;
  /** After every publication (for metrics). */
  readonly onPublished?: (count: number) => void;
  /** Name used by fault switches. @defaultValue 'handoff' */
  readonly name?: string;
  readonly faults?: Faults;
  /** @defaultValue () => new Date() */
  readonly now?: () => Date;
}

/** How long rows written for a handoff are left to it before the relay sweeps them. */
export const SWEEP_AFTER_MS = 5_000;

/** A transaction's events to hand over, as `enqueue` finds them (keyed by the transaction client). */
const handedOver = new WeakMap<object, { readonly events: AnyEnvelope[]; readonly sweepAfterMs: number }>();

/** The handoff `enqueue` writes into, when `tx` is a transaction of a client that hands over. */
export const handoffOf = (tx: object) => handedOver.get(tx);

/** Handoffs by the client they wrap (`handingOver(db)`), so the service's outbox part finds its own. */
const handoffs = new WeakMap<object, OutboxHandoff>();

/**
 * The service's database client, handing the events each transaction enqueued to the broker after
 * it commits — once {@link OutboxHandoff.start} has been given a publisher; until then (and after
 * `stop`) its transactions are the client's own and the relay publishes everything.
 */
export function handingOver<C extends TransactionalClient<SqlClient>>(db: C, sweepAfterMs = SWEEP_AFTER_MS): C {
  const handoff = new OutboxHandoff(db, sweepAfterMs);
  const client = new Proxy(db, {
    get(target, property) {
      if (property === '$transaction') return handoff.transaction;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  handoffs.set(client, handoff);
  return client;
}

/** The handoff of a client made by {@link handingOver}; undefined for any other. */
export const handoffFor = (db: object): OutboxHandoff | undefined => handoffs.get(db);

/** Hands committed events to the broker, then marks them published; see the module's comment. */
export class OutboxHandoff {
  #options: Required<HandoffOptions> | undefined;
  /** Publications and marks under way: what `stop` waits for. */
  readonly #inFlight = new Set<Promise<void>>();
  /** Published, not yet marked: the next mark takes them all (one statement while another runs). */
  #toMark: string[] = [];
  #marking = false;

  constructor(
    readonly db: TransactionalClient<SqlClient>,
    readonly sweepAfterMs: number,
  ) {}

  /** From now on, each committed transaction's events are published at once. */
  start(options: HandoffOptions): void {
    this.#options = {
      onError: () => {},
      onPublished: () => {},
      name: 'handoff',
      faults: noFaults,
      now: () => new Date(),
      ...options,
    };
  }

  /** Stops handing over (the relay publishes what comes after) and waits for what is under way. */
  async stop(): Promise<void> {
    this.#options = undefined;
    while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight]);
  }

  /** The client's `$transaction`: the same transaction, and its events handed over after the commit. */
  readonly transaction = async <R>(fn: (tx: SqlClient) => Promise<R>, options?: object): Promise<R> => {
    if (!this.#options || typeof fn !== 'function') return this.db.$transaction(fn, options); // not handing over, or Prisma's array form
    let events: AnyEnvelope[] = [];
    const result = await this.db.$transaction(async (tx) => {
      events = [];
      handedOver.set(tx, { events, sweepAfterMs: this.sweepAfterMs });
      return fn(tx);
    }, options);
    if (events.length > 0) void this.#track(this.#handOver(events));
    return result;
  };

  async #handOver(events: AnyEnvelope[]): Promise<void> {
    const options = this.#options;
    if (!options) return; // stopped meanwhile: the relay sweeps them
    try {
      await options.publish(events);
      options.onPublished(events.length);
    } catch (error) {
      options.onError(error);
      return;
    }
    // Publish first, mark second, as the relay does: a crash in between publishes them again.
    options.faults.crashIf('crash-after-publish', options.name);
    this.#toMark.push(...events.map((event) => event.messageId));
    if (this.#marking) return; // the mark under way takes these next
    this.#marking = true;
    void this.#track(this.#markAll(options));
  }

  async #markAll({ now, onError }: Required<HandoffOptions>): Promise<void> {
    try {
      while (this.#toMark.length > 0) {
        const ids = this.#toMark;
        this.#toMark = [];
        await this.db.$executeRaw`
          UPDATE outbox_messages SET published_at = ${now()}, attempts = attempts + 1, last_error = NULL
           WHERE message_id = ANY(${ids}::uuid[]) AND published_at IS NULL`;
      }
    } catch (error) {
      this.#toMark = []; // left for the relay, which publishes them again
      onError(error);
    } finally {
      this.#marking = false;
    }
  }

  #track(work: Promise<void>): Promise<void> {
    this.#inFlight.add(work);
    void work.finally(() => this.#inFlight.delete(work));
    return work;
  }
}
