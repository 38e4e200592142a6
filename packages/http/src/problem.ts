import type { ErrorRequestHandler, RequestHandler, Response } from 'express';
import { HttpError, STATUS_OF, type ErrorCode, type FieldError } from './errors.js';

const TITLES: Record<ErrorCode, string> = {
  invalid_request: 'The request is invalid',
  malformed_json: 'The request body is not valid JSON',
  unauthorized: 'Authentication required',
  forbidden: 'Not allowed',
  admin_disabled: 'Operator endpoints are disabled',
  not_found: 'Not found',
  conflict: 'Conflict with the current state',
  idempotency_key_in_flight: 'A request with this Idempotency-Key is still in progress',
  payload_too_large: 'The request body is too large',
  rate_limited: 'Too many requests',
  unsupported_media_type: 'The request body must be application/json',
  idempotency_key_reused: 'This Idempotency-Key was used with a different request',
  order_refused: 'The order cannot be placed as it stands',
  internal_error: 'Internal error',
  dependency_unavailable: 'A dependency is unavailable',
};

/**
 * What each problem means and what to do about it: served at its `type` (`GET /problems/<type>`,
 * a URI relative to the service, as RFC 9457 allows) and listed in docs/operations.md
 * "Problem types", which a test holds to this table.
 */
export const MEANINGS: Record<ErrorCode, string> = {
  invalid_request:
    'A parameter, header or body field is not what the operation accepts; `errors` names each one. Fix the request; retrying it as it is fails again.',
  malformed_json: 'The body is not JSON that parses. Fix the request.',
  unauthorized:
    'No token, or one that is not valid here (wrong signature, issuer, audience, or expired). Send a valid `Authorization: Bearer` token.',
  forbidden:
    'The token is valid but does not allow this (a customer asking for what only the operator may do, or a token without the claim the operation needs).',
  admin_disabled: 'The operator endpoints are off: the service was started without `ADMIN_TOKEN` or `ADMIN_TOKENS`.',
  not_found: "No such resource for this caller: another customer's order answers the same as one that does not exist.",
  conflict:
    'The resource is in a state that does not allow this (an order too far along to cancel; a dead letter too old to replay without a reason).',
  idempotency_key_in_flight:
    "A request with this `Idempotency-Key` is still being processed. Retry after a moment: the answer will be the first request's.",
  payload_too_large: 'The body is larger than the service accepts (64 kB).',
  rate_limited: 'Too many requests from this caller or address in the window. Retry after the `Retry-After` seconds.',
  unsupported_media_type: 'The body is not `application/json` in UTF-8.',
  idempotency_key_reused:
    'This `Idempotency-Key` was used before with a different body. Use a new key for a new request.',
  order_refused:
    'The catalog cannot sell a line as asked (unknown or withdrawn SKU, another currency, too large a total); `errors` names each line.',
  internal_error:
    "The service failed unexpectedly; the detail says nothing more on purpose, the service's log does. Retrying may work.",
  dependency_unavailable:
    'A dependency (the database, Redis) is busy or unreachable. Retry after the `Retry-After` seconds.',
};

/** Where a problem's explanation is: its `type`, relative to the service that answered it. */
export const problemType = (code: ErrorCode) => `/problems/${code.replaceAll('_', '-')}`;

/** The problem a `type` names (`order-refused` → `order_refused`), if any. */
export function problemOfType(type: string): ErrorCode | undefined {
  const code = type.replaceAll('-', '_');
  return Object.hasOwn(STATUS_OF, code) ? (code as ErrorCode) : undefined;
}

/** The page a problem's `type` resolves to: its title, status and meaning. */
export function problemPage(code: ErrorCode): string {
  const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  const meaning = escape(MEANINGS[code]).replace(/`([^`]+)`/g, '<code>$1</code>');
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escape(TITLES[code])}</title></head>
<body><h1>${escape(TITLES[code])}</h1><p>HTTP ${STATUS_OF[code]} · <code>${code}</code></p><p>${meaning}</p></body></html>`;
}

/** Answers with RFC 9457 problem details (the successor of RFC 7807), plus a string `code`. */
export function sendProblem(res: Response, code: ErrorCode, detail: string, errors?: readonly FieldError[]): void {
  res
    .status(STATUS_OF[code])
    .type('application/problem+json')
    .json({
      type: problemType(code),
      title: TITLES[code],
      status: STATUS_OF[code],
      code,
      detail,
      ...(errors ? { errors } : {}),
    });
}

export const notFoundHandler: RequestHandler = (req, res) => {
  sendProblem(res, 'not_found', `no route for ${req.method} ${req.path}`);
};

/** The one place where thrown errors become HTTP answers. Unknown errors never leak their message. */
export function problemHandler(
  onUnexpected: (error: unknown) => void,
  translate: (error: unknown) => HttpError | undefined = () => undefined,
): ErrorRequestHandler {
  return (thrown: unknown, _req, res, next) => {
    if (res.headersSent) return next(thrown);
    // What the client sent wrong, as express and its body parser say it (a path that does not
    // decode, a charset it cannot read, a body that is not JSON or too large): the client's 4xx,
    // before any translation of the service's own errors can mistake it for one of them.
    const refused = clientRefusal(thrown);
    if (refused) return sendProblem(res, refused.code, refused.detail);
    const error = translate(thrown) ?? thrown;
    if (error instanceof HttpError) {
      // A dependency that is only busy or briefly away: tell the client when to retry.
      if (error.code === 'dependency_unavailable') res.set('Retry-After', '1');
      if (error.headers) res.set(error.headers);
      return sendProblem(res, error.code, error.message, error.errors);
    }
    onUnexpected(error);
    sendProblem(res, 'internal_error', 'an unexpected error occurred; it has been logged');
  };
}

/** The problem for an error express or body-parser raised about the request itself (a 4xx of theirs), if it is one. */
function clientRefusal(thrown: unknown): { code: ErrorCode; detail: string } | undefined {
  if (thrown instanceof HttpError) return undefined;
  const error = thrown as { status?: unknown; type?: unknown; limit?: unknown } | undefined;
  if (typeof error?.status !== 'number' || error.status < 400 || error.status > 499) return undefined;
  if (error.type === 'entity.parse.failed')
    return { code: 'malformed_json', detail: 'the body could not be parsed as JSON' };
  if (error.type === 'entity.too.large')
    return { code: 'payload_too_large', detail: `the body exceeds ${String(error.limit)} bytes` };
  if (error.status === 415) {
    return { code: 'unsupported_media_type', detail: 'send the body as application/json in UTF-8' };
  }
  return { code: 'invalid_request', detail: 'the request cannot be read (a path or a body that does not decode)' };
}
