import { isEventType, type Catalogue, type CatalogueSpec, type Envelope, type EventType } from './catalogue.js';
import { envelopeSchema } from './envelope.js';
import type { StandardSchemaV1 } from './standard-schema.js';

/** Why a message broke its contract: the `code` stored with a dead letter. */
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

/** The outcome of {@link parseEnvelope}: the typed envelope, or the contract it broke. */
export type ParseResult<E = unknown> =
  { readonly ok: true; readonly envelope: E } | { readonly ok: false; readonly error: ContractError };

/** The longest reason kept or logged, in characters: a poison message cannot fill a log line. */
export const MAX_REASON_LENGTH = 500;

/** Trims a reason to the bound every stored or logged reason respects. */
export function boundReason(reason: string): string {
  return reason.length <= MAX_REASON_LENGTH ? reason : `${reason.slice(0, MAX_REASON_LENGTH - 1)}…`;
}

const VERSIONED_NAME = /^(?<name>[a-z0-9-]+\.[a-z0-9-]+)\.v(?<version>\d+)$/;

/**
 * Validates a message from the wire against `catalogue`: first the envelope, then the contract
 * name and version, then the body against that contract's schema. Pass `expected` when the caller
 * subscribes to a contract (a consumer: one, or the versions it accepts), so a misrouted message
 * is refused rather than half-understood.
 */
export async function parseEnvelope<S extends CatalogueSpec, T extends EventType<S> = EventType<S>>(
  catalogue: Catalogue<S>,
  input: unknown,
  expected?: T | readonly T[],
): Promise<ParseResult<Envelope<S, T>>> {
  const envelope = await envelopeSchema['~standard'].validate(input);
  if (envelope.issues) return failure('malformed_envelope', describeIssues(envelope.issues));

  const { type } = envelope.value;
  if (!isEventType(catalogue, type)) {
    const name = VERSIONED_NAME.exec(type)?.groups?.name;
    const known = name !== undefined && Object.keys(catalogue.contracts).some((t) => t.startsWith(`${name}.v`));
    return known
      ? failure('unsupported_version', `type: contract version "${type}" is not supported`)
      : failure('unknown_type', `type: "${type}" is not a known contract`);
  }
  const accepted: readonly string[] | undefined = typeof expected === 'string' ? [expected] : expected;
  if (accepted !== undefined && !accepted.includes(type)) {
    return failure('unexpected_type', `type: expected "${accepted.join('" or "')}", received "${type}"`);
  }

  const body = await catalogue.contracts[type]!.body['~standard'].validate(envelope.value.body);
  if (body.issues) return failure('invalid_body', describeIssues(body.issues, ['body']));
  return { ok: true, envelope: { ...envelope.value, type, body: body.value } as Envelope<S, T> };
}

function failure(code: ContractErrorCode, reason: string): { ok: false; error: ContractError } {
  return { ok: false, error: { code, reason: boundReason(reason) } };
}

function describeIssues(issues: readonly StandardSchemaV1.Issue[], prefix: PropertyKey[] = []): string {
  const keyOf = (segment: PropertyKey | StandardSchemaV1.PathSegment) =>
    typeof segment === 'object' ? segment.key : segment;
  return issues
    .map((issue) => `${formatPath([...prefix, ...(issue.path ?? []).map(keyOf)])}: ${issue.message}`)
    .join('; ');
}

function formatPath(path: PropertyKey[]): string {
  if (path.length === 0) return '(envelope)';
  return path.reduce<string>(
    (text, key) => (typeof key === 'number' ? `${text}[${key}]` : text ? `${text}.${String(key)}` : String(key)),
    '',
  );
}
