import type { AnyEnvelope } from '@idem/contracts';
import { testMessage } from '@idem/testkit';
import type { SqlClient } from '@idem/database';
import type { Faults, FaultName } from '@idem/faults';
import { hasOneStatement, type DeliveryOutcome, type Inbox, type MessageHandler } from '@idem/inbox';

/**
 * What the explorer needs of one service: the steps one order's messages make there (each
 * delivery to a real handler through the real inbox, and the service's worker), on the service's
 * own schema in a fresh database, and the invariants its state must keep.
 */
export interface Model {
  readonly name: string;
  /** The mistakes it can be made to make (`--wrong-way`), each a test-only patch in this package. */
  readonly wrongWays: readonly string[];
  open(options: { wrongWay?: string | undefined }): Promise<Service>;
}

/** One order's messages at a service, as they can happen together. */
export interface Story {
  readonly name: string;
  /** In the order they are usually sent (the pairs' set-up order). */
  readonly steps: readonly string[];
  /** Steps that can only come once another was processed here (what they answer caused them). */
  readonly causes?: Readonly<Record<string, string>>;
  /**
   * How many times each step is delivered in the orders of delivery: twice (the message and its
   * duplicate) by default; once for a long story, whose duplicates the shorter ones cover.
   */
  readonly copies?: 1 | 2;
}

export interface Service {
  readonly databaseUrl: string;
  readonly stories: readonly Story[];
  /** A fresh start: every table emptied, the provider forgotten, the clock back. */
  reset(): Promise<void>;
  /** Runs one step; `crash`: the process dies at the step's fault switch. */
  step(name: string, options?: { crash?: boolean }): Promise<unknown>;
  /** What the broker and the workers do afterwards, to the end: the order's final state. */
  settle(): Promise<void>;
  /** The invariants broken by the state after `story`, each as a sentence. */
  check(story: Story): Promise<string[]>;
  /** The documented windows the state shows were passed through (`crash_window_send`): not broken, counted apart. */
  windows?(story: Story): Promise<string[]>;
  /** The final state, without ids or times: schedules that reach the same one count once. */
  state(): Promise<string>;
  close(): Promise<void>;
}

/** A process death at a fault switch, as the explorer makes it: nothing after the switch runs. */
export class Crash extends Error {
  constructor(readonly at: FaultName) {
    super(`crashed at ${at}`);
  }
}

/**
 * Fault switches the explorer arms for one step at a time: `rollback-after-handler` rolls the
 * delivery back as a crash before the commit would; a crash switch throws {@link Crash}.
 */
export class CrashSwitches implements Faults {
  #armed: readonly FaultName[] = [];

  async during<R>(names: readonly FaultName[], work: () => Promise<R>): Promise<R> {
    this.#armed = names;
    try {
      return await work();
    } finally {
      this.#armed = [];
    }
  }

  fires(name: FaultName): boolean {
    return this.#armed.includes(name);
  }

  crashIf(name: FaultName): void {
    if (this.#armed.includes(name)) throw new Crash(name);
  }
}

/** One delivery, as the consumer runner makes a batch of one: the one-statement way when the handler has one. */
export function deliver<Tx extends SqlClient, M extends AnyEnvelope>(
  inbox: Inbox<Tx>,
  consumer: string,
  message: M,
  handler: MessageHandler<Tx, M>,
): Promise<DeliveryOutcome> {
  return hasOneStatement(handler)
    ? inbox.consumeInOneStatement(consumer, message, handler)
    : inbox.consume(consumer, message, handler);
}

/** A clock the explorer moves: a minute per step, so that a crashed worker's lease has run out by the next. */
export class Clock {
  static readonly START = Date.parse('2026-12-05T10:00:00.000Z');
  #at = Clock.START;
  readonly now = (): Date => new Date(this.#at);
  advance(ms = 60_000): void {
    this.#at += ms;
  }
  reset(): void {
    this.#at = Clock.START;
  }
}

/**
 * One order's cancellation as its consumers receive it: in v1 (the order's version 2), and the same
 * cancellation announced again after the producer moved to v2 (version 3: a capture refused by orders).
 */
export function cancellationsOf(orderId: string) {
  const order = { aggregateId: orderId, correlationId: orderId };
  return {
    cancelled: testMessage('orders.order-cancelled.v1', { ...order, aggregateVersion: 2, body: { orderId } }),
    cancelledV2: testMessage('orders.order-cancelled.v2', {
      ...order,
      aggregateVersion: 3,
      body: { orderId, reason: { by: 'customer', text: 'changed my mind' } },
    }),
  };
}
