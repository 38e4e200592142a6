import { isMessageId, parseEnvelope, type AnyEnvelope, type Catalogue, type ParseResult } from '@idem/contracts';
import type { SqlClient } from '@idem/database';
import { noFaults, type Faults } from '@idem/faults';
import { hasOneStatement, isSettled, type DeliveryOutcome, type Inbox, type MessageHandler } from '@idem/inbox';
import type { Span } from '@opentelemetry/api';
import { endProcess, startCommit, startProcess, under } from './consumer-spans.js';
import { DeliveryBatches } from './delivery-batches.js';

/**
 * The consume path, one method a step, so that an editor's "go to definition" follows a delivery
 * from the broker to the inbox's INSERT and back:
 *
 *     process(received)                 what a transport's consumer calls for each delivery
 *       → consume(delivery)             hands the delivery to this instance's group commit
 *         → DeliveryBatches.add         waits while a batch commits (delivery-batches.ts)
 *           → commitBatch(deliveries)   one transaction: alone, or several together
 *             → Inbox.consume           the article's algorithm (@idem/inbox inbox.ts)
 *             → Inbox.consumeInOneStatement   the same in one statement, for a handler that has
 *                                       one (@idem/inbox one-statement.ts), else consume
 *             → Inbox.consumeBatch      the same for several (@idem/inbox group-commit.ts)
 *       ← the settlement: settle, retry, or a dead letter (keepDeadLetter): the transport acts on it
 */

/** One delivery as a transport received it: what it carried, and which attempt it is. */
export interface Received {
  /** The message as it came (parsed JSON): an envelope, unless it is malformed. */
  readonly data: unknown;
  /** The broker's own id of the delivery, where it has one (BullMQ's job id), kept beside a dead letter. */
  readonly brokerId?: string;
  /** 1 for the first delivery, 2 for the first retry, ... */
  readonly attempt: number;
  /** Whether a transient failure now makes it a dead letter. */
  readonly lastAttempt: boolean;
}

/**
 * What a transport does with a delivery once its inbox transaction ended: `settle` it (acknowledge:
 * the broker forgets it), `retry` it later with backoff, or drop it as a `dead` letter (stored in
 * the inbox's dead-letter table already). A dead letter that could not be stored comes back as a
 * `retry` on its last attempt: the transport keeps it as its broker keeps failed deliveries.
 */
export type Settlement = { readonly report: DeliveryReport } & (
  { readonly settle: 'settle' } | { readonly settle: 'retry' | 'dead'; readonly reason: string }
);

/** One delivery and how it ended: what logs, metrics and traces are made of. */
export interface DeliveryReport {
  readonly consumer: string;
  /** The delivery identity (`messageIdOf`): the job's id only for one too malformed to carry one. */
  readonly messageId: string;
  /** Undefined when the message was too malformed to say. */
  readonly contract?: string;
  readonly producer?: string;
  readonly correlationId?: string;
  readonly causationId?: string | null;
  readonly traceparent?: string;
  /** 1 for the first delivery, 2 for the first retry, ... */
  readonly attempt: number;
  readonly durationMs: number;
  readonly outcome: DeliveryOutcome;
  /** Set when this delivery ended as a dead letter. */
  readonly deadLettered: boolean;
}

/** A parsed delivery on its way to the inbox, under its consumer span. */
export interface Delivery {
  readonly envelope: AnyEnvelope;
  readonly span: Span;
}

/** What a consumer runner is made of: its consumer, inbox and handler, and what it reports to. */
export interface ConsumerRunnerOptions<Tx extends SqlClient> {
  readonly catalogue: Catalogue;
  readonly consumer: string;
  readonly inbox: Inbox<Tx>;
  readonly handler: MessageHandler<Tx, AnyEnvelope>;
  /** The contracts the consumer subscribes to. */
  readonly contracts: readonly string[];
  readonly maxBatch: number;
  readonly maxPayloadBytes: number;
  readonly faults?: Faults;
  readonly onDelivery?: (report: DeliveryReport) => void;
  readonly onError?: (error: unknown) => void;
  /** `messaging.system` of the consumer spans (OpenTelemetry's name of the broker). */
  readonly system: string;
}

/**
 * Whether a delivery's outcome makes it a dead letter, and with which code and reason: a
 * permanent failure at once, a transient one when its last attempt fails too. Anything else
 * is settled, or retried.
 */
export function deadLetterVerdict(
  outcome: DeliveryOutcome,
  { attempt, lastAttempt }: { attempt: number; lastAttempt: boolean },
): { code: string; reason: string } | undefined {
  if (outcome.outcome === 'permanent_failure') return { code: outcome.code, reason: outcome.reason };
  if (outcome.outcome === 'transient_failure' && lastAttempt)
    return {
      code: 'retries_exhausted',
      reason: `still failing after ${attempt} attempts: ${outcome.code}: ${outcome.reason}`,
    };
  return undefined;
}

/**
 * The delivery identity of a message: its envelope's message id — read from its data when the rest
 * of the envelope is refused, as long as it is one — or, for a message too malformed to carry one,
 * the broker's id of the delivery (another thing: a republished copy has an id of its own).
 */
export function messageIdOf(data: unknown, brokerId: string | undefined): string {
  const id = (data as { messageId?: unknown } | null | undefined)?.messageId;
  return isMessageId(id) ? id : (brokerId ?? 'unknown');
}

/** A dead letter that could not be stored: its delivery stays at the broker, failed. */
export class DeadLetterWriteError extends Error {
  readonly code = 'dead_letter_write_failed';
  constructor(
    readonly consumer: string,
    readonly messageId: string,
    cause: unknown,
  ) {
    super(
      `${consumer}: the dead letter of ${messageId} could not be stored: ${(cause as Error)?.message ?? String(cause)}`,
      { cause },
    );
  }
}

/**
 * Runs one consumer's deliveries, on any transport: each is read, handed to the inbox, and settled
 * only after the inbox transaction has committed. processed, duplicate, stale and
 * conflicting_duplicate settle it; a transient failure is retried with backoff; a permanent
 * failure, or a transient one on its last attempt, becomes a dead letter and never a processed
 * record.
 */
export class ConsumerRunner<Tx extends SqlClient> {
  readonly consumer: string;
  readonly #options: ConsumerRunnerOptions<Tx>;
  readonly #batches: DeliveryBatches;
  readonly #faults: Faults;

  constructor(options: ConsumerRunnerOptions<Tx>) {
    this.consumer = options.consumer;
    this.#options = options;
    this.#faults = options.faults ?? noFaults;
    this.#batches = new DeliveryBatches(this, options.maxBatch);
  }

  /**
   * One delivery, as its transport received it: read it, hand it to the inbox (a malformed one is
   * refused without it), and say how to settle it only after the inbox transaction ended.
   */
  async process(received: Received): Promise<Settlement> {
    const { consumer } = this;
    const { data, brokerId, attempt } = received;
    const started = performance.now();
    const parsed = await this.#read(data);
    const envelope = parsed.ok ? parsed.envelope : undefined;
    // A parsed envelope has its id; only a refused one is read again for it.
    const messageId = envelope?.messageId ?? messageIdOf(data, brokerId);
    const span = startProcess(this.#options.system, consumer, { messageId, attempt }, envelope);
    const outcome: DeliveryOutcome = parsed.ok
      ? await this.consume({ envelope: parsed.envelope, span })
      : { outcome: 'permanent_failure', code: parsed.error.code, reason: parsed.error.reason };
    const deadLettered = await this.keepDeadLetter(received, messageId, outcome);
    endProcess(span, outcome, deadLettered !== undefined);
    const report: DeliveryReport = {
      consumer,
      messageId,
      contract: envelope?.type,
      producer: envelope?.producer,
      correlationId: envelope?.correlationId,
      causationId: envelope?.causationId,
      traceparent: envelope?.traceparent,
      attempt,
      durationMs: performance.now() - started,
      outcome,
      deadLettered: deadLettered !== undefined,
    };
    // Told in the delivery's span, so that its log line carries the span's trace id.
    under(span, () => this.#options.onDelivery?.(report));

    if (isSettled(outcome)) {
      // Settlement comes after the commit. A crash here leaves the delivery to be redelivered
      // (once its lock expires, or its channel closed), and the redelivery stops at the
      // processed-message record. (The switch fires only where that window is: after a commit
      // that processed something.)
      if (outcome.outcome === 'processed') this.#faults.crashIf('crash-after-commit', consumer);
      return { settle: 'settle', report };
    }
    if (deadLettered) return { settle: 'dead', reason: `${deadLettered.code}: ${deadLettered.reason}`, report };
    return { settle: 'retry', reason: `${outcome.code}: ${outcome.reason}`, report };
  }

  /**
   * Hands a delivery to this instance's group commit: it goes at once when no batch is committing,
   * or with those that arrived while one did. Resolves with its outcome once its transaction ended.
   */
  consume(delivery: Delivery): Promise<DeliveryOutcome> {
    return this.#batches.add(delivery);
  }

  /**
   * One batch of deliveries in one inbox transaction. A batch of one is an ordinary
   * `Inbox.consume` under its delivery's span; a larger one is `Inbox.consumeBatch` (group
   * commit) under a `commit` span linked to each delivery's.
   */
  async commitBatch(deliveries: readonly Delivery[]): Promise<DeliveryOutcome[]> {
    const { consumer, inbox, handler } = this.#options;
    if (deliveries.length === 1) {
      const [{ envelope, span }] = deliveries as [Delivery];
      return [
        await under(span, () =>
          hasOneStatement(handler)
            ? inbox.consumeInOneStatement(consumer, envelope, handler)
            : inbox.consume(consumer, envelope, handler),
        ),
      ];
    }
    const span = startCommit(
      consumer,
      deliveries.map((delivery) => delivery.span),
    );
    const envelopes = deliveries.map((delivery) => delivery.envelope);
    return under(span, () => inbox.consumeBatch(consumer, envelopes, handler)).finally(() => span.end());
  }

  /**
   * A dead letter this delivery must become (a permanent failure, or a transient one on its last
   * attempt), stored before it is counted or logged: one that could not be written is not one,
   * and the delivery then fails as it is (its broker keeps it, failed).
   */
  async keepDeadLetter(received: Received, messageId: string, outcome: DeliveryOutcome) {
    const verdict = deadLetterVerdict(outcome, received);
    if (!verdict) return undefined;
    try {
      await this.deadLetter(received, messageId, verdict.code, verdict.reason);
      return verdict;
    } catch (error) {
      this.#options.onError?.(new DeadLetterWriteError(this.consumer, messageId, error));
      return undefined;
    }
  }

  /**
   * Stores a dead letter under the envelope's message id, with the broker's id of the delivery
   * beside it (another thing: a republished copy has an id of its own); a delivery too malformed to
   * carry a message id is kept under the broker's id.
   */
  async deadLetter(
    { data, brokerId, attempt }: Pick<Received, 'data' | 'brokerId' | 'attempt'>,
    messageId: string,
    code: string,
    reason: string,
  ): Promise<void> {
    await this.#options.inbox.deadLetters.record({
      consumer: this.consumer,
      messageId,
      brokerId: brokerId ?? null,
      payload: data,
      code,
      reason,
      attempts: attempt,
    });
  }

  /**
   * A delivery's message as the consumer reads it: the size is checked before any parsing (a huge
   * payload costs no validation work), then the envelope against the contracts it subscribes to.
   */
  async #read(data: unknown): Promise<ParseResult<AnyEnvelope>> {
    const { catalogue, contracts, maxPayloadBytes } = this.#options;
    const bytes = Buffer.byteLength(JSON.stringify(data ?? null) ?? '');
    if (bytes > maxPayloadBytes) {
      const reason = `${bytes} bytes, more than the ${maxPayloadBytes} accepted`;
      return { ok: false, error: { code: 'payload_too_large', reason } };
    }
    return parseEnvelope(catalogue, data, contracts);
  }
}
