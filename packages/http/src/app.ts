import { createServer, type Server } from 'node:http';
import express, { type Express, type RequestHandler } from 'express';
import { z } from 'zod';
import { accessLog, type AccessLogEntry } from './access-log.js';
import { auditTo, type AuditSink } from './audit.js';
import { HttpError } from './errors.js';
import { answer, route } from './openapi.js';
import { notFoundHandler, problemHandler, problemOfType, problemPage } from './problem.js';

/** A dependency the service cannot work without, checked by GET /health. */
export type HealthCheck = () => PromiseLike<unknown>;

export interface HttpAppOptions {
  /** Adds the service's routes. */
  readonly routes: (app: Express) => void;
  readonly health: Record<string, HealthCheck>;
  /** Largest accepted JSON body. @defaultValue '64kb' */
  readonly bodyLimit?: string;
  readonly onUnexpectedError?: (error: unknown) => void;
  /** Told why a health check fails: the answer itself says only which one (errors name hosts and ports). */
  readonly onUnhealthy?: (check: string, error: unknown) => void;
  /** Turns errors the service recognises into problems (e.g. a database that is out of connections → 503). */
  readonly translateError?: (error: unknown) => HttpError | undefined;
  /** Where operator actions are recorded, one event each (audit.ts). @defaultValue nowhere */
  readonly audit?: AuditSink;
  /** Proxies whose X-Forwarded-For is believed (express's `trust proxy`): hops, or addresses and ranges. @defaultValue none */
  readonly trustProxy?: number | readonly string[];
  /** Runs before every route but the probes (the runtime's limit on failed authentications). */
  readonly guard?: RequestHandler;
  /** Told of every request once it is answered: the access log (access-log.ts). @defaultValue nothing */
  readonly onRequest?: (entry: AccessLogEntry) => void;
}

/** What the readiness probe answers: each dependency by name, never why one fails. */
const HEALTH = z.object({
  status: z.enum(['ok', 'unavailable']),
  checks: z.record(z.string(), z.enum(['ok', 'failing'])),
});

const requireJson: RequestHandler = (req, _res, next) => {
  const hasBody = req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0';
  if ((hasBody || req.headers['transfer-encoding']) && !req.is('application/json')) {
    throw new HttpError('unsupported_media_type', 'send the body as application/json');
  }
  next();
};

/**
 * An express app with JSON bodies, problem details for every error, and two probes:
 * `GET /health` checks the dependencies (readiness: take no traffic while one is down) and
 * `GET /health/live` only that the process answers (liveness: a restart cannot bring a
 * database back, so it never looks at one).
 */
export function createHttpApp({
  routes,
  health,
  bodyLimit = '64kb',
  onUnexpectedError = () => {},
  onUnhealthy = () => {},
  translateError,
  audit,
  trustProxy,
  guard,
  onRequest,
}: HttpAppOptions): Express {
  const app = express();
  app.disable('x-powered-by');
  if (onRequest) app.use(accessLog(onRequest));
  if (trustProxy !== undefined) app.set('trust proxy', typeof trustProxy === 'number' ? trustProxy : [...trustProxy]);
  if (audit) auditTo(app, audit);
  app.use(requireJson, express.json({ limit: bodyLimit, type: 'application/json' }));
  probes(app, health, onUnhealthy);
  problemPages(app);
  if (guard) app.use(guard);
  routes(app);
  app.use(notFoundHandler, problemHandler(onUnexpectedError, translateError));
  return app;
}

/**
 * The two probes: `GET /health` checks the dependencies (readiness), `GET /health/live` only that
 * the process answers (liveness).
 */
function probes(
  app: Express,
  health: Record<string, HealthCheck>,
  onUnhealthy: (check: string, error: unknown) => void,
) {
  route(
    app,
    {
      method: 'get',
      path: '/health/live',
      summary: 'Liveness: the process answers (looks at no dependency)',
      responses: { 200: answer('Alive', z.object({ status: z.literal('ok') })) },
    },
    (_input, _req, res) => void res.json({ status: 'ok' }),
  );
  route(
    app,
    {
      method: 'get',
      path: '/health',
      summary: 'Readiness: each dependency checked, by name only',
      responses: {
        200: answer('Every check ok', HEALTH),
        503: answer('A check fails (which one, never why)', HEALTH),
      },
    },
    async (_input, _req, res) => {
      const results = await Promise.all(
        Object.entries(health).map(async ([name, check]) => {
          try {
            await withTimeout(check(), 2000);
            return [name, 'ok'] as const;
          } catch (error) {
            onUnhealthy(name, error);
            return [name, 'failing'] as const;
          }
        }),
      );
      const healthy = results.every(([, state]) => state === 'ok');
      res
        .status(healthy ? 200 : 503)
        .json({ status: healthy ? 'ok' : 'unavailable', checks: Object.fromEntries(results) });
    },
  );
}

/** `GET /problems/:type`: what each problem's `type` URI resolves to. */
function problemPages(app: Express) {
  route(
    app,
    {
      method: 'get',
      path: '/problems/:type',
      summary: "What a problem's `type` means and what to do about it (an HTML page)",
      params: z.object({ type: z.string().max(100) }),
      responses: { 200: 'The explanation, as text/html', 404: 'No such problem type' },
    },
    ({ params: { type } }, _req, res) => {
      const code = problemOfType(type);
      if (!code) throw new HttpError('not_found', `no problem type ${type}`);
      res.type('html').send(problemPage(code));
    },
  );
}

export interface RunningServer {
  readonly server: Server;
  readonly port: number;
  close(): Promise<void>;
}

/** Listens on `port` (0 = any free port); close() stops accepting and ends idle connections. */
export interface ListenOptions {
  /** The address to bind. @defaultValue '127.0.0.1' */
  readonly host?: string;
  /** A client must have sent all its headers within this. @defaultValue 10000 */
  readonly headersTimeoutMs?: number;
  /** … and its whole request within this. @defaultValue 30000 */
  readonly requestTimeoutMs?: number;
  /** An idle kept-alive connection is closed after this. @defaultValue 5000 */
  readonly keepAliveTimeoutMs?: number;
}

/**
 * Listens with timeouts a slow or silent client cannot outlast (Node's defaults let one hold a
 * connection for minutes), checked every second.
 */
export function listen(
  app: Express,
  port: number,
  {
    host = '127.0.0.1',
    headersTimeoutMs = 10_000,
    requestTimeoutMs = 30_000,
    keepAliveTimeoutMs = 5_000,
  }: ListenOptions = {},
): Promise<RunningServer> {
  const server = createServer(
    {
      headersTimeout: headersTimeoutMs,
      requestTimeout: requestTimeoutMs,
      keepAliveTimeout: keepAliveTimeoutMs,
      connectionsCheckingInterval: Math.min(1_000, headersTimeoutMs),
    },
    app,
  );
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      const address = server.address();
      resolve({
        server,
        port: typeof address === 'object' && address ? address.port : port,
        close: () =>
          new Promise<void>((done) => {
            server.close(() => done());
            server.closeIdleConnections();
          }),
      });
    });
  });
}

function withTimeout<T>(promise: PromiseLike<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}
