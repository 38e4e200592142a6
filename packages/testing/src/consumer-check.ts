import { isDeepStrictEqual } from 'node:util';
import type { AnyEnvelope } from '@idem/contracts';
import type { SqlClient, TransactionalClient } from '@idem/database';
import { createFaults } from '@idem/faults';
import { Inbox, type DeliveryOutcome, type MessageHandler, type OutcomeName } from '@idem/inbox';

/** A consumer to check: its handler, one message it takes, and how to read what it changes. */
export interface ConsumerCheck<Tx extends SqlClient, M extends AnyEnvelope> {
  /** The database the inbox's tables and the handler's rows live in (a pool of at least two connections). */
  readonly db: TransactionalClient<Tx>;
  /** The consumer's name: half of the inbox's key `(consumer, message_id)`. */
  readonly consumer: string;
  /** A message it has not seen (`testEnvelope` makes one). */
  readonly message: M;
  readonly handler: MessageHandler<Tx, M>;
  /** Reads the business effect the handler makes (its rows, a count): compared after each delivery. */
  readonly effects: () => Promise<unknown>;
  /**
   * Another body under the same message id — the producer bug the inbox reports as a
   * `conflicting_duplicate`. Left out, no conflicting copy is delivered.
   */
  readonly conflictingBody?: M['body'];
}

/** One delivery the check made: what it was, how it ended, and the effect read after it. */
export interface CheckedDelivery {
  readonly delivery: string;
  readonly outcome: OutcomeName;
  readonly effects: unknown;
}

/** A delivery of the check ended otherwise than the Idempotent Consumer must. */
export class IdempotencyViolation extends Error {
  constructor(
    message: string,
    /** Every delivery made up to and including the one that broke the rule. */
    readonly deliveries: readonly CheckedDelivery[],
  ) {
    super(message);
    this.name = 'IdempotencyViolation';
  }
}

const show = (value: unknown) => {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 300 ? `${text.slice(0, 299)}…` : text;
};

/**
 * Delivers one message to a consumer through a real inbox, the ways a broker can: once with its
 * transaction rolled back after the handler ran (the `rollback-after-handler` switch of
 * @idem/faults), then twice at the same moment from two inbox instances, then once more, then
 * (when given) as a copy with another body. Checks what the pattern promises: the rolled-back
 * delivery leaves no effect; of the two at once one is `processed` and one `duplicate`; the
 * later copies are `duplicate` and `conflicting_duplicate` and change nothing. Resolves with the
 * deliveries made; rejects with an {@link IdempotencyViolation} naming the first that broke a rule.
 */
export async function checkIdempotentConsumer<Tx extends SqlClient, M extends AnyEnvelope>(
  check: ConsumerCheck<Tx, M>,
): Promise<CheckedDelivery[]> {
  const { db, consumer, message, handler, effects } = check;
  const deliveries: CheckedDelivery[] = [];
  const inbox = () => new Inbox({ db });

  async function expectDelivery(
    delivery: string,
    outcomes: Promise<DeliveryOutcome[]>,
    expected: OutcomeName[],
    effectsExpected?: unknown,
  ): Promise<unknown> {
    const ended = (await outcomes).map((o) => o.outcome).sort(); // two at once end in either order
    const after = await effects();
    deliveries.push(...ended.map((outcome) => ({ delivery, outcome, effects: after })));
    const fail = (why: string) => {
      throw new IdempotencyViolation(`${consumer}, ${delivery}: ${why}`, deliveries);
    };
    if (!isDeepStrictEqual(ended, [...expected].sort()))
      fail(`ended ${ended.join(' and ')}, expected ${expected.join(' and ')}`);
    if (effectsExpected !== undefined && !isDeepStrictEqual(after, effectsExpected))
      fail(`changed the effect from ${show(effectsExpected)} to ${show(after)}`);
    return after;
  }

  const before = await effects();
  const rollingBack = new Inbox({
    db,
    faults: createFaults([{ name: 'rollback-after-handler', target: consumer, probability: 1, count: 1 }]),
  });
  await expectDelivery(
    'a delivery rolled back after its handler ran',
    Promise.all([rollingBack.consume(consumer, message, handler)]),
    ['transient_failure'],
    before,
  );
  const once = await expectDelivery(
    'two deliveries at the same moment',
    Promise.all([inbox().consume(consumer, message, handler), inbox().consume(consumer, message, handler)]),
    ['processed', 'duplicate'],
  );
  await expectDelivery('a redelivery', Promise.all([inbox().consume(consumer, message, handler)]), ['duplicate'], once);
  if (check.conflictingBody !== undefined) {
    const conflicting = { ...message, body: check.conflictingBody };
    await expectDelivery(
      'a copy with another body',
      Promise.all([inbox().consume(consumer, conflicting, handler)]),
      ['conflicting_duplicate'],
      once,
    );
  }
  return deliveries;
}
