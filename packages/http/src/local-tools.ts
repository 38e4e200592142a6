import type { RequestHandler } from 'express';

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
