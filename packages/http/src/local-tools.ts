import { randomBytes } from 'node:crypto';
import express, { type RequestHandler } from 'express';
import { isLoopbackAddress } from './callers.js';
import { bearerOf, operatorMatcher } from './operators.js';

/** A comma-separated list of `host:port` from the environment (ALLOWED_HOSTS, e.g. compose's published port). */
export const hostList = (value: string | undefined): string[] =>
  (value ?? '')
    .split(',')
    .map((host) => host.trim().toLowerCase())
    .filter(Boolean);

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Guards a local tool (the console, the simulators, the SMTP sink) against the one client it
 * cannot trust: a browser on the same machine, driven by a page from anywhere. Listening on
 * 127.0.0.1 does not help against that page. It refuses, with 403 and a plain reason:
 * - a request whose `Host` is neither 127.0.0.1, localhost nor [::1] with the port it arrived
 *   on, nor one of `allowedHosts` (a published port, a compose service name): by DNS rebinding,
 *   the attacker's own name pointed at 127.0.0.1, a page would read this tool as its own;
 * - a state-changing request (anything but GET, HEAD, OPTIONS) that a browser says comes from
 *   another site (`Sec-Fetch-Site` other than `same-origin` or `none`), or, from a browser that
 *   does not say, another origin (`Origin` other than this tool's own). A client that is no
 *   browser sends neither and passes: it could send anything it likes anyway, and tests and
 *   scripts are such clients.
 * A form that changes state should also carry a token the page got from this tool (the
 * console's); this guard is the other half of that defence.
 */
export function localToolGuard({ allowedHosts = [] }: { allowedHosts?: readonly string[] } = {}): RequestHandler {
  const extra = allowedHosts.map((host) => host.toLowerCase());
  return (req, res, next) => {
    // A probe (Kubernetes sends the pod's address as Host) may ask whether it is up: it says no more.
    if (req.method === 'GET' && req.path === '/health') return next();
    const host = (req.headers.host ?? '').toLowerCase();
    const port = req.socket.localPort;
    const hosts = [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, ...extra];
    if (!hosts.includes(host)) {
      return void res
        .status(403)
        .type('text/plain')
        .send(`This tool answers only to ${hosts.join(', ')}, not to "${host}".`);
    }
    if (!SAFE_METHODS.has(req.method)) {
      const site = req.get('sec-fetch-site');
      const origin = req.get('origin')?.toLowerCase();
      // A browser that says where a request comes from (Sec-Fetch-Site) is believed; it sends
      // `Origin: null` for this tool's own forms under `Referrer-Policy: no-referrer`. Without it
      // (an older browser), an Origin must be this tool's own: `null` could be a sandboxed frame.
      const foreign =
        site !== undefined
          ? site !== 'same-origin' && site !== 'none'
          : origin !== undefined && origin !== `${req.protocol}://${host}`;
      if (foreign) {
        return void res
          .status(403)
          .type('text/plain')
          .send('Refused: this request comes from another web page, and only this tool may change its state.');
      }
    }
    next();
  };
}

/**
 * Headers for every answer of a local tool: no other page may frame it (clickjacking), the
 * browser never guesses a type, no address leaks in a Referer, and scripts, styles and form
 * targets are this tool's own (`Content-Security-Policy`; nothing inline runs).
 */
export const localToolHeaders: RequestHandler = (_req, res, next) => {
  res.set({
    'Content-Security-Policy':
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
      "form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    'X-Content-Type-Options': 'nosniff',
    'Referrer-Policy': 'no-referrer',
    'X-Frame-Options': 'DENY',
  });
  next();
};

/** How long a console login lasts. */
const SESSION_MS = 12 * 3_600_000;
/** Failed logins answered per address in a quarter of an hour; past them a failure is told 429. */
const LOGIN_FAILURES = 10;
const SESSION_COOKIE = 'idem_session';

/**
 * A local tool bound beyond this machine serves only its operator. On 127.0.0.1 the Host and
 * Origin checks of {@link localToolGuard} suffice: only this machine's clients reach the tool.
 * On a network anyone there can, and a client that is no browser sends any Host — so there every
 * request but `GET /health` must prove it is the operator's: `Authorization: Bearer <token>` of
 * one of `tokens`, or, with `login`, the session cookie the tool's login form set (a browser:
 * the console). Without a token the tool must not bind there: this throws, naming `what` to set.
 */
export function operatorOnlyBeyondLoopback({
  host,
  tokens,
  login = false,
  what,
}: {
  /** The address the tool binds. */
  host: string;
  tokens: readonly string[];
  login?: boolean;
  /** What to set for a token, for the refusal to start: `ADMIN_TOKEN`. */
  what: string;
}): RequestHandler {
  if (isLoopbackAddress(host)) return (_req, _res, next) => next();
  const match = operatorMatcher(tokens.filter(Boolean).map((token, i) => ({ name: `operator-${i}`, token })));
  if (!match)
    throw new Error(`binding ${host} serves the network, where only the operator may use this tool: set ${what}`);
  const sessions = new Map<string, number>();
  const failures = new Map<string, { count: number; until: number }>();
  const parseForm = express.urlencoded({ extended: false, limit: '4kb' });
  return (req, res, next) => {
    if (req.method === 'GET' && req.path === '/health') return next();
    const bearer = bearerOf(req.get('authorization'));
    if (bearer !== undefined && match(bearer)) return next();
    const session = cookieOf(req.get('cookie'), SESSION_COOKIE);
    if (login && session !== undefined && (sessions.get(session) ?? 0) > Date.now()) return next();
    if (login && req.path === '/login' && req.method === 'POST') {
      return parseForm(req, res, () => {
        const address = req.ip ?? req.socket.remoteAddress ?? 'unknown';
        const token = String((req.body as { token?: unknown } | undefined)?.token ?? '');
        // The right token logs in whatever others sent from this address: only failures are
        // limited, so nobody can lock the operator out by guessing wrong.
        if (!match(token)) {
          const failed = failures.get(address);
          const current = failed && failed.until > Date.now() ? failed : { count: 0, until: Date.now() + 15 * 60_000 };
          failures.set(address, { count: current.count + 1, until: current.until });
          if (current.count >= LOGIN_FAILURES) {
            return void res.status(429).type('text/plain').send('Too many failed logins from this address; try later.');
          }
          return void res.status(401).type('html').send(loginPage('That is not the operator token.'));
        }
        const id = randomBytes(32).toString('base64url');
        sessions.set(id, Date.now() + SESSION_MS);
        res.set(
          'Set-Cookie',
          `${SESSION_COOKIE}=${id}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${SESSION_MS / 1000}`,
        );
        res.redirect(303, '/');
      });
    }
    if (login && req.method === 'GET') return void res.status(401).type('html').send(loginPage());
    res
      .status(401)
      .set('WWW-Authenticate', 'Bearer realm="idem local tool"')
      .type('text/plain')
      .send('This tool serves a network: send Authorization: Bearer <operator token>.');
  };
}

/** The value of cookie `name` in a Cookie header. */
function cookieOf(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? '').split(';')) {
    const [key, ...value] = part.trim().split('=');
    if (key === name) return value.join('=');
  }
  return undefined;
}

function loginPage(problem?: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>idem — operator login</title></head>
<body><h1>Operator login</h1>
<p>This console serves a network, so it asks for the operator token (in compose:
<code>docker compose exec console cat /run/idem-secrets/admin-token</code>).</p>
${problem ? `<p role="alert">${problem}</p>` : ''}
<form method="post" action="/login"><label>Operator token <input name="token" type="password" autocomplete="off" required></label>
<button type="submit">Log in</button></form></body></html>`;
}
