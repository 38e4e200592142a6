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
import { afterCommit, clientOf, type SqlClient } from '@idem/database';
import { noFaults, type Faults } from '@idem/faults';
import { markPublished } from './relay-batch.js';

/** What a handoff needs to publish: the broker, and how it reports. */
export interface HandoffOptions {
  /** Publishes events to the broker; resolves only when the broker has accepted all of them. */
  readonly publish: (envelopes: AnyEnvelope[]) => Promise<void>;
  /** How long rows written for a handoff are left to it before the relay sweeps them. @defaultValue {@link SWEEP_AFTER_MS} */
  readonly sweepAfterMs?: number;
  /**
   * How long a publication's mark waits for the next ones, so one statement marks them all: under
   * load, a mark per many events rather than one per transaction. A crash in that time publishes
   * them again (the accepted duplicate). Must be well under `sweepAfterMs`. @defaultValue 200
   */
  readonly markAfterMs?: number;
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

/** How long rows written for a handoff are left to it before the relay sweeps them, by default. */
export const SWEEP_AFTER_MS = 5_000;

/** Handoffs by the client whose transactions they hand over. */
const handoffs = new WeakMap<object, OutboxHandoff>();

/**
 * The handoff of `db`'s transactions. It hands nothing over until started, and only for a client
 * that runs work after commit (`runningAfterCommit` from @idem/database); for any other, the relay
 * publishes everything, as before.
 */
export function handoffFor(db: SqlClient): OutboxHandoff {
  let handoff = handoffs.get(db);
  if (!handoff) handoffs.set(db, (handoff = new OutboxHandoff(db)));
  return handoff;
}

/**
 * The handoff of `db` (a transaction's client, or a client), if it has one — started or not:
 * `enqueue` offers it every event, and one that has not started (or has stopped) declines,
 * leaving the event to the relay.
 */
export const handoffOf = (db: SqlClient): OutboxHandoff | undefined => handoffs.get(clientOf(db) ?? db);

/** Hands committed events to the broker, then marks them published; see the module's comment. */
export class OutboxHandoff {
  #options: Required<HandoffOptions> | undefined;
  /** Each transaction's events, handed over together once it commits. */
  readonly #events = new WeakMap<object, AnyEnvelope[]>();
  /** Publications and marks under way: what `stop` waits for. */
  readonly #inFlight = new Set<Promise<void>>();
  /** Published, not yet marked, each with when it was: the next mark takes them all in one statement. */
  #toMark: { readonly id: string; readonly at: Date }[] = [];
  /** Set while a mark waits (`markAfterMs`): ends the wait at once (`stop`). */
  #markNow: (() => void) | undefined;

  constructor(readonly db: SqlClient) {}

  /** From now on, each committed transaction's events are published at once. */
  start(options: HandoffOptions): void {
    this.#options = {
      sweepAfterMs: SWEEP_AFTER_MS,
      markAfterMs: 200,
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
    this.#markNow?.();
    while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight]);
  }

  /**
   * Takes `envelope`, enqueued in `tx`, to hand over once `tx` commits; says when the relay may
   * sweep its row — undefined when nothing is handed over (not started, or `tx` runs no work after
   * commit) and the relay publishes it as soon as it is due.
   */
  take(tx: SqlClient, envelope: AnyEnvelope, now: Date): Date | undefined {
    if (!this.#options) return undefined;
    let events = this.#events.get(tx);
    if (!events) {
      const taken: AnyEnvelope[] = [];
      if (!afterCommit(tx, () => void this.#track(this.#handOver(taken)))) return undefined;
      this.#events.set(tx, (events = taken));
    }
    events.push(envelope);
    return this.#sweepAt(now, this.#options);
  }

  /**
   * `take` for an event written by a statement that runs alone (`enqueueInOneStatement`): no
   * transaction to wait for, so the writer calls `handOver` once its statement has committed the
   * row. Undefined when not started.
   */
  takeAlone(envelope: AnyEnvelope, now: Date): { readonly sweepAt: Date; readonly handOver: () => void } | undefined {
    if (!this.#options) return undefined;
    return {
      sweepAt: this.#sweepAt(now, this.#options),
      handOver: () => void this.#track(this.#handOver([envelope])),
    };
  }

  /** When the relay may sweep a row written for this handoff at `now`. */
  #sweepAt(now: Date, { sweepAfterMs }: Required<HandoffOptions>): Date {
    return new Date(now.getTime() + sweepAfterMs);
  }

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
    const at = options.now(); // published_at says when it was published, not when it was marked
    this.#toMark.push(...events.map((event) => ({ id: event.messageId, at })));
    if (this.#markNow) return; // the mark that waits takes these too
    const waited = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, options.markAfterMs);
      this.#markNow = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    void this.#track(waited.then(() => this.#mark(options)));
  }

  async #mark({ onError }: Required<HandoffOptions>): Promise<void> {
    this.#markNow = undefined;
    const marks = this.#toMark;
    this.#toMark = [];
    try {
      await markPublished(this.db, marks);
    } catch (error) {
      onError(error); // left for the relay, which publishes them again
    }
  }

  #track(work: Promise<void>): Promise<void> {
    this.#inFlight.add(work);
    void work.finally(() => this.#inFlight.delete(work));
    return work;
  }
}
