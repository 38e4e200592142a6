/**
 * Errors that cross the HTTP edge. Code decides the status, in one table; the message is
 * for a person; `errors` names the offending fields.
 */
export const STATUS_OF = {
  invalid_request: 400,
  malformed_json: 400,
  unauthorized: 401,
  forbidden: 403,
  admin_disabled: 403,
  not_found: 404,
  conflict: 409,
  idempotency_key_in_flight: 409,
  payload_too_large: 413,
  rate_limited: 429,
  unsupported_media_type: 415,
  idempotency_key_reused: 422,
  order_refused: 422,
  internal_error: 500,
  dependency_unavailable: 503,
} as const;

export type ErrorCode = keyof typeof STATUS_OF;

export interface FieldError {
  readonly field: string;
  readonly message: string;
}

export class HttpError extends Error {
  readonly errors?: readonly FieldError[];
  /** Response headers the problem needs (`Retry-After`, `WWW-Authenticate`). */
  readonly headers?: Readonly<Record<string, string>>;
  constructor(
    readonly code: ErrorCode,
    message: string,
    options: ErrorOptions & { errors?: readonly FieldError[]; headers?: Record<string, string> } = {},
  ) {
    super(message, options);
    if (options.errors) this.errors = options.errors;
    if (options.headers) this.headers = options.headers;
  }

  get status(): number {
    return STATUS_OF[this.code];
  }
}
