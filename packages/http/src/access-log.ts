import { context } from '@opentelemetry/api';
import type { RequestHandler } from 'express';
import { correlationIdOf } from './audit.js';

/**
 * One line of the access log: what was asked, by route template (never the path itself, which
 * can hold an id or an email), how it ended and how long it took, and the correlation id that
 * joins it to the messages the request caused. Never a token, a body or an address.
 */
export interface AccessLogEntry {
  readonly method: string;
  /** `/orders/:id`; `unmatched` when no route took the request. */
  readonly route: string;
  readonly status: number;
  readonly durationMs: number;
  readonly correlationId: string;
}

/**
 * Calls `write` once per request, when its answer has been sent, in the request's trace context:
 * a logger that reads the active span puts the request's trace id on the line.
 */
export function accessLog(write: (entry: AccessLogEntry) => void): RequestHandler {
  return (req, res, next) => {
    const started = performance.now();
    const correlationId = correlationIdOf(req, res);
    res.on(
      'finish',
      context.bind(context.active(), () => {
        const route = req.route ? `${req.baseUrl}${String(req.route.path)}` : 'unmatched';
        write({
          method: req.method,
          route,
          status: res.statusCode,
          durationMs: Math.round((performance.now() - started) * 10) / 10,
          correlationId,
        });
      }),
    );
    next();
  };
}
