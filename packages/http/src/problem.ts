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

/** Answers with RFC 9457 problem details (the successor of RFC 7807), plus a string `code`. */
export function sendProblem(res: Response, code: ErrorCode, detail: string, errors?: readonly FieldError[]): void {
  res
    .status(STATUS_OF[code])
    .type('application/problem+json')
    .json({
      type: `https://idem.dev/problems/${code.replaceAll('_', '-')}`,
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
