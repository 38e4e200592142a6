import type { EventBody, EventType } from './events.js';
import { newMessageId } from './message-id.js';
import type { Envelope } from './parse-envelope.js';
import { serviceOf } from './topology.js';
import { traceparentOf } from './trace-context.js';

/** What a producer says about a new event; the envelope adds identity and time. */
export interface EventDraft<T extends EventType = EventType> {
  readonly type: T;
  readonly body: EventBody<T>;
  readonly aggregateId: string;
  readonly aggregateVersion: number;
  readonly correlationId: string;
  /** The message id that caused this event, or null at the edge (an HTTP request). */
  readonly causationId: string | null;
  readonly traceparent?: string;
}

/**
 * Assigns the message id (a UUID v7 of `now`), the one identity every redelivery of this event will carry, and
 * records the trace context the event was produced in (when tracing is on).
 */
export function createEnvelope<T extends EventType>(draft: EventDraft<T>, now: Date): Envelope<T> {
  const { traceparent = traceparentOf(), ...rest } = draft;
  return {
    messageId: newMessageId(now),
    producer: serviceOf(draft.type),
    occurredAt: now.toISOString(),
    ...rest,
    ...(traceparent === undefined ? {} : { traceparent }),
  } as Envelope<T>;
}

/** The correlation and causation ids of an event caused by `message`. */
export function causedBy(message: { messageId: string; correlationId: string }): {
  correlationId: string;
  causationId: string;
} {
  return { correlationId: message.correlationId, causationId: message.messageId };
}
