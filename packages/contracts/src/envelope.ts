import type { StandardSchemaV1 } from './standard-schema.js';

/**
 * The envelope every integration message travels in. `messageId` is assigned once, when the
 * producer writes its outbox row, and never changes across relay retries: it is the delivery
 * identity the idempotent consumer deduplicates on. Its body has not been checked against its
 * contract yet (`parseEnvelope` does that).
 */
export interface RawEnvelope {
  readonly messageId: string;
  /** The contract's versioned name, `<producer>.<event>.v<n>`. */
  readonly type: string;
  readonly producer: string;
  /** ISO 8601, with its offset. */
  readonly occurredAt: string;
  readonly correlationId: string;
  readonly causationId: string | null;
  readonly aggregateId: string;
  readonly aggregateVersion: number;
  /** W3C trace context of the producing request, when there was one. */
  readonly traceparent?: string;
  readonly body: unknown;
}

/** Any validated envelope, of any catalogue: what the inbox and the broker carry without reading the body. */
export type AnyEnvelope = RawEnvelope;

/** A UUID of RFC 9562 (any version, the nil and max ones included): a message id's form. */
const UUID =
  /^(?:[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}|0{8}-0{4}-0{4}-0{4}-0{12}|f{8}-f{4}-f{4}-f{4}-f{12})$/i;
/** A date and time of ISO 8601 with its offset (`Z` or `±hh:mm`). */
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})$/;

/** Whether `value` has a message id's form (a UUID). */
export const isMessageId = (value: unknown): value is string => typeof value === 'string' && UUID.test(value);

type Check = (value: unknown) => string | undefined;
const text =
  (max: number): Check =>
  (value) =>
    typeof value !== 'string'
      ? 'expected a string'
      : value.length < 1 || value.length > max
        ? `expected 1 to ${max} characters`
        : undefined;
const uuid: Check = (value) => (isMessageId(value) ? undefined : 'expected a UUID');
const dateTime: Check = (value) =>
  typeof value === 'string' && DATE_TIME.test(value) && !Number.isNaN(Date.parse(value))
    ? undefined
    : 'expected an ISO 8601 date and time with its offset';
const version: Check = (value) =>
  Number.isInteger(value) && (value as number) >= 0 && (value as number) <= 2_147_483_647
    ? undefined
    : 'expected an integer from 0 to 2147483647';

/** Each field's check; `body` is any value, checked later against its contract. */
const FIELDS: Record<Exclude<keyof RawEnvelope, 'body'>, Check> = {
  messageId: uuid,
  type: text(200),
  producer: text(100),
  occurredAt: dateTime,
  correlationId: uuid,
  causationId: (value) => (value === null ? undefined : uuid(value)),
  aggregateId: text(200),
  aggregateVersion: version,
  traceparent: (value) =>
    value === undefined
      ? undefined
      : typeof value === 'string' && value.length <= 256
        ? undefined
        : 'expected at most 256 characters',
};

/**
 * The envelope's schema, a Standard Schema of its own (no validation library needed): the fields
 * above, each named in the issue it fails with; fields it does not know are dropped.
 */
export const envelopeSchema: StandardSchemaV1<unknown, RawEnvelope> = {
  '~standard': {
    version: 1,
    vendor: 'idem',
    validate(value) {
      if (typeof value !== 'object' || value === null || Array.isArray(value))
        return { issues: [{ message: 'expected an object' }] };
      const fields = value as Record<string, unknown>;
      const issues = Object.entries(FIELDS).flatMap(([key, check]) => {
        const message = check(fields[key]);
        return message === undefined ? [] : [{ message, path: [key] }];
      });
      if (issues.length > 0) return { issues };
      const envelope = Object.fromEntries(
        [...Object.keys(FIELDS), 'body']
          .filter((key) => fields[key] !== undefined || key === 'body')
          .map((key) => [key, fields[key]]),
      );
      return { value: envelope as unknown as RawEnvelope };
    },
  },
};
