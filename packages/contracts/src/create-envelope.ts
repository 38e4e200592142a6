import type { Catalogue, CatalogueSpec, Envelope, EventBody, EventType } from './catalogue.js';
import { newMessageId } from './message-id.js';
import { traceparentOf } from './trace-context.js';

/** What a producer says about a new event of its catalogue; the envelope adds identity and time. */
export interface EventDraft<S extends CatalogueSpec, T extends EventType<S> = EventType<S>> {
  readonly type: T;
  readonly body: EventBody<S, T>;
  readonly aggregateId: string;
  readonly aggregateVersion: number;
  readonly correlationId: string;
  /** The message id that caused this event, or null at the edge (an HTTP request). */
  readonly causationId: string | null;
  readonly traceparent?: string;
}

/**
 * Assigns the message id (a UUID v7 of `now`), the one identity every redelivery of this event
 * will carry, names its producer as the catalogue does, and records the trace context the event
 * was produced in (when tracing is on).
 */
export function createEnvelope<S extends CatalogueSpec, T extends EventType<S>>(
  catalogue: Catalogue<S>,
  draft: EventDraft<S, T>,
  now: Date,
): Envelope<S, T> {
  const { traceparent = traceparentOf(), ...rest } = draft;
  return {
    messageId: newMessageId(now),
    producer: catalogue.contracts[draft.type]!.producer,
    occurredAt: now.toISOString(),
    ...rest,
    ...(traceparent === undefined ? {} : { traceparent }),
  } as unknown as Envelope<S, T>;
}

/** The correlation and causation ids of an event caused by `message`. */
export function causedBy(message: { messageId: string; correlationId: string }): {
  correlationId: string;
  causationId: string;
} {
  return { correlationId: message.correlationId, causationId: message.messageId };
}
