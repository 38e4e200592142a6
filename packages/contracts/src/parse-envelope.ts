import type { z } from 'zod';
import { envelopeSchema, type RawEnvelope } from './envelope.js';
import { events, isEventType, type EventBody, type EventType } from './events.js';

/** An envelope whose body has been validated against its contract. */
export type Envelope<T extends EventType = EventType> = T extends EventType
  ? Omit<RawEnvelope, 'type' | 'body'> & { type: T; body: EventBody<T> }
  : never;

export type ContractErrorCode =
  | 'payload_too_large'
  | 'malformed_envelope'
  | 'unknown_type'
  | 'unsupported_version'
  | 'unexpected_type'
  | 'invalid_body';

/** Why a message can never be processed as it is. Redelivery cannot heal any of these. */
export interface ContractError {
  readonly code: ContractErrorCode;
  /** Human-readable, names the offending field, at most {@link MAX_REASON_LENGTH} characters. */
  readonly reason: string;
}

export type ParseResult<T extends EventType = EventType> =
  { readonly ok: true; readonly envelope: Envelope<T> } | { readonly ok: false; readonly error: ContractError };

export const MAX_REASON_LENGTH = 500;

/** Trims a reason to the bound every stored or logged reason respects. */
export function boundReason(reason: string): string {
  return reason.length <= MAX_REASON_LENGTH ? reason : `${reason.slice(0, MAX_REASON_LENGTH - 1)}…`;
}

const VERSIONED_NAME = /^(?<name>[a-z0-9-]+\.[a-z0-9-]+)\.v(?<version>\d+)$/;

/**
 * Validates a message from the wire: first the envelope, then the contract name and version,
 * then the body against that contract. Pass `expected` when the caller subscribes to a
 * contract (a consumer: one, or the versions it accepts), so a misrouted message is refused
 * rather than half-understood.
 */
export function parseEnvelope(input: unknown): ParseResult;
export function parseEnvelope<T extends EventType>(input: unknown, expected: T | readonly T[]): ParseResult<T>;
export function parseEnvelope(input: unknown, expected?: EventType | readonly EventType[]): ParseResult {
  const envelope = envelopeSchema.safeParse(input);
  if (!envelope.success) return failure('malformed_envelope', describeIssues(envelope.error));

  const { type } = envelope.data;
  if (!isEventType(type)) {
    const name = VERSIONED_NAME.exec(type)?.groups?.name;
    const known = name !== undefined && Object.keys(events).some((t) => t.startsWith(`${name}.v`));
    return known
      ? failure('unsupported_version', `type: contract version "${type}" is not supported`)
      : failure('unknown_type', `type: "${type}" is not a known contract`);
  }
  const accepted = typeof expected === 'string' ? [expected] : expected;
  if (accepted !== undefined && !accepted.includes(type)) {
    return failure('unexpected_type', `type: expected "${accepted.join('" or "')}", received "${type}"`);
  }

  const body = events[type].safeParse(envelope.data.body);
  if (!body.success) return failure('invalid_body', describeIssues(body.error, ['body']));
  return { ok: true, envelope: { ...envelope.data, type, body: body.data } as Envelope };
}

function failure(code: ContractErrorCode, reason: string): ParseResult {
  return { ok: false, error: { code, reason: boundReason(reason) } };
}

function describeIssues(error: z.ZodError, prefix: PropertyKey[] = []): string {
  return error.issues.map((issue) => `${formatPath([...prefix, ...issue.path])}: ${issue.message}`).join('; ');
}

function formatPath(path: PropertyKey[]): string {
  if (path.length === 0) return '(envelope)';
  return path.reduce<string>(
    (text, key) => (typeof key === 'number' ? `${text}[${key}]` : text ? `${text}.${String(key)}` : String(key)),
    '',
  );
}
