import { randomUUID } from 'node:crypto';
import type { Express, Request, RequestHandler, Response } from 'express';
import { z } from 'zod';
import { operatorOf } from './operators.js';

/**
 * One operator action, as the audit trail records it: who did what to which, how it ended and
 * what it did, when, and the correlation id to find what it caused. Never a token: the
 * credentials are not part of the request's target.
 */
export interface AuditEvent {
  readonly at: string;
  /** The operator's name (ADMIN_TOKENS), `operator` for ADMIN_TOKEN, `unknown` for a refused caller. */
  readonly actor: string;
  /** The operation: `PUT /stock/:sku`. */
  readonly action: string;
  /** What it was asked to act on: path parameters, query and body, bounded. */
  readonly target: Record<string, unknown>;
  /** done (2xx, 3xx), refused (401, 403: not an operator), rejected (other 4xx), failed (5xx). */
  readonly outcome: 'done' | 'refused' | 'rejected' | 'failed';
  readonly status: number;
  /** What the action did, as its handler reported it (`auditResult`): counts, ids replayed or refused. */
  readonly result?: unknown;
  readonly correlationId: string;
}

export type AuditSink = (event: AuditEvent) => void;

const SINK = Symbol('audit sink');

/** Where an app's operator actions are recorded (the runtime: the log's `audit` key and a counter). */
export function auditTo(app: Express, sink: AuditSink): void {
  (app.locals as { [SINK]?: AuditSink })[SINK] = sink;
}

/** A handler says what its operator action did; the audit event carries it. Returns `result`, to answer with. */
export function auditResult<T>(res: Response, result: T): T {
  res.locals.auditResult = result;
  return result;
}

/**
 * Records one audit event per request of an operator operation, when its answer is sent
 * (whatever ended it: the handler, a refusal, an error). `customer-or-operator` operations are
 * recorded only when the operator called them: a customer's own reads are not operator actions.
 */
export function auditing(app: Express, action: string, operatorOnly: boolean): RequestHandler {
  return (req, res, next) => {
    const correlationId = correlationIdOf(req, res);
    // What the request names, read now: by the time a refusal's answer is sent, express has left
    // the route and its path parameters (a refused `PUT /stock/:sku` would record no SKU).
    const target = bounded({ ...req.params, ...(req.query as object), ...(req.body as object | undefined) });
    res.on('finish', () => {
      const sink = (app.locals as { [SINK]?: AuditSink })[SINK];
      const actor = operatorOf(res);
      if (!sink || (!actor && !operatorOnly)) return;
      const result = (res.locals as { auditResult?: unknown }).auditResult;
      sink({
        at: new Date().toISOString(),
        actor: actor ?? 'unknown',
        action,
        target: target as Record<string, unknown>,
        outcome: outcomeOf(res.statusCode),
        status: res.statusCode,
        ...(result === undefined ? {} : { result: bounded(result) }),
        correlationId,
      });
    });
    next();
  };
}

/**
 * The request's correlation id: the caller's X-Correlation-Id when it is a UUID, a new one
 * otherwise — chosen once per request, so the audit event and the messages the request causes
 * carry the same one.
 */
export function correlationIdOf(req: Request, res: Response): string {
  const locals = res.locals as { correlationId?: string };
  if (locals.correlationId) return locals.correlationId;
  const given = req.get('x-correlation-id');
  return (locals.correlationId = given && z.uuid().safeParse(given).success ? given : randomUUID());
}

function outcomeOf(status: number): AuditEvent['outcome'] {
  if (status < 400) return 'done';
  if (status === 401 || status === 403) return 'refused';
  return status < 500 ? 'rejected' : 'failed';
}

/** Keys whose values an audit event never carries, whatever a body holds. */
const SECRET = /token|secret|password|authorization|key$/i;

/** A copy small enough for a log line: 100 items a list, 200 characters a string, 4 levels. */
function bounded(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return value.length > 200 ? `${value.slice(0, 200)}…` : value;
  if (value === null || typeof value !== 'object') return value;
  if (depth >= 4) return '…';
  if (Array.isArray(value)) {
    const items = value.slice(0, 100).map((item) => bounded(item, depth + 1));
    return value.length > 100 ? [...items, `… ${value.length - 100} more`] : items;
  }
  return Object.fromEntries(
    Object.entries(value).map(([key, item]) => [key, SECRET.test(key) ? '[redacted]' : bounded(item, depth + 1)]),
  );
}
