import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import type { Server } from 'node:http';
import { runChecks, SERVICES, type CheckerOptions, type Service } from '@idem/checker';
import { subscriptions } from '@idem/shop';
import { FAULT_NAMES, type FaultRule } from '@idem/faults';
import { localToolGuard, localToolHeaders, operatorOnlyBeyondLoopback } from '@idem/http';
import { connectRedis } from '@idem/messaging';
import type * as Explorer from '@idem/explorer';
import express, { type Request, type RequestHandler, type Response } from 'express';
import { connectDatabases, latestOrders, orderTimeline, withNewEntries, type Sources } from './reads.js';
import {
  ASSETS,
  checkerPage,
  escape,
  lessonsPage,
  explorerPage,
  faultsPage,
  ordersPage,
  page,
  SCENARIOS,
  timelineFragment,
  timelinePage,
  type ProcessFaults,
  type Scenario,
} from './views.js';

export interface ConsoleOptions {
  /** Each service's database, read in read-only transactions (in compose, as a read-only role). */
  readonly databaseUrls: CheckerOptions['databaseUrls'];
  readonly redisUrl: string;
  /** The system's queue prefix: each service's delivery journal is `<prefix>:journal:<service>`. */
  readonly queuePrefix: string;
  /** Where orders are placed, as any client places them. */
  readonly ordersApi: string;
  /** The mail server's API; with a login in it (compose's Mailpit), the operator token is not sent there. */
  readonly mailApi?: string;
  /** The payment provider, for the checker (read-only list endpoints). */
  readonly stripe?: CheckerOptions['stripe'];
  /** The operator token: the console's login beyond loopback, and the native mail sink's API. Never sent to a process's switches. */
  readonly adminToken?: string;
  /**
   * Each service's fault switches token (its processes' FAULTS_TOKEN, which opens their `/faults`
   * and nothing else): the only token the console sends to a process. A process's service is the
   * start of its name (`payments-api`, `payments-2` → payments); a service without one stays out of
   * reach. @defaultValue none
   */
  readonly faultsTokens?: Partial<Record<Service, string>>;
  /**
   * A customer token for customer `console`, given by whoever starts the console (compose's
   * secrets step, `pnpm start`), with which it places and cancels its orders. The console holds no
   * key that signs tokens: it can act as no other customer. Without it the orders API refuses them.
   */
  readonly customerToken?: string;
  /** Every service process whose fault switches the console may set: name → base URL. */
  readonly processes: Record<string, string>;
  /** How often the live view looks for new journal entries. @defaultValue 500 */
  readonly livePollMs?: number;
  /** Live views open at once; one more answers 503 (each holds a connection and polls). @defaultValue 16 */
  readonly maxLiveViews?: number;
  /** A live view's stream ends after this (the browser's EventSource opens a new one). @defaultValue 600000 */
  readonly liveViewMs?: number;
  /**
   * Names the console answers to besides 127.0.0.1, localhost and [::1] on the port a request
   * arrives on (compose: the published port, CONSOLE_ALLOWED_HOSTS). @defaultValue none
   */
  readonly allowedHosts?: readonly string[];
  /**
   * The address it binds. Beyond loopback it serves only the operator: a login form asks for the
   * operator token (`adminToken`, without which it refuses to start there). @defaultValue 127.0.0.1
   */
  readonly host?: string;
  /** The consumers' broker lock (CONSUMER_LOCK_MS), to tell a settling delivery from a dead one. @defaultValue 30000 */
  readonly consumerLockMs?: number;
  /**
   * Run the lessons here (`pnpm lesson` in-process: they create databases of their own and
   * start a consumer process with tsx, so only in a checkout, as the native run is). @defaultValue false
   */
  readonly lessons?: boolean;
  /**
   * Explore every interleaving of a cancellation and a reservation at payments here (the explorer
   * of `pnpm explore`, in-process: it makes a database of its own, on the server and as the role
   * TEST_POSTGRES_URL names, and runs the services' handlers from their sources, so only in a
   * checkout, as the native run is). One run at a time. @defaultValue false
   */
  readonly explorer?: boolean;
}

/**
 * The teaching console: one order's every message and delivery, live; fault switches per
 * process; the checker. It reads what the system records and writes no business data; the
 * only things it changes are fault switches (through each process, with the operator token)
 * and orders it places through the orders API like any client.
 */
export function createConsole(options: ConsoleOptions) {
  // Beyond loopback, only the operator (and it refuses to start without an operator token there).
  const operatorOnly = operatorOnlyBeyondLoopback({
    host: options.host ?? '127.0.0.1',
    tokens: [options.adminToken ?? ''],
    login: true,
    what: 'ADMIN_TOKEN',
  });
  const faultsTokens = options.faultsTokens ?? {};
  /** The switches token of `process`'s service: the only one the console sends it. */
  const switchesToken = (process: string) => {
    const service = SERVICES.find((s) => process === s || process.startsWith(`${s}-`));
    return service && faultsTokens[service];
  };
  const redis = connectRedis(options.redisUrl, { maxRetriesPerRequest: 1 });
  redis.on('error', () => {}); // the pages say when Redis cannot be read
  const sources: Sources = {
    databases: connectDatabases(options.databaseUrls),
    redis,
    prefix: options.queuePrefix,
    ...(options.mailApi ? { mailApi: options.mailApi } : {}),
    ...(options.adminToken ? { mailApiToken: options.adminToken } : {}),
    ...(options.consumerLockMs ? { consumerLockMs: options.consumerLockMs } : {}),
  };
  // The console holds the operator token and starts processes: every page it serves, and every
  // form it answers, is its own. A page elsewhere can neither read it (Host) nor post to it
  // (Origin, Sec-Fetch-Site, and the form token below, which only a page of this console has).
  const formToken = randomBytes(32).toString('base64url');
  const html = (res: Response, content: string, status = 200) =>
    void res.status(status).type('html').send(withFormToken(content, formToken));
  const app = express();
  app.disable('x-powered-by');
  app.use(localToolHeaders, localToolGuard({ allowedHosts: options.allowedHosts ?? [] }), operatorOnly);
  app.use(express.urlencoded({ extended: false, limit: '16kb' }), requireFormToken(formToken));

  app.get('/health', (_req, res) => void res.json({ status: 'ok' }));
  for (const [path, asset] of Object.entries(ASSETS)) {
    app.get(path, (_req, res) => void res.type(asset.type).set('cache-control', 'no-cache').send(asset.body));
  }

  app.get('/', async (req, res) => {
    const notice = typeof req.query.notice === 'string' ? req.query.notice : undefined;
    html(res, ordersPage(await latestOrders(sources), notice));
  });

  app.post('/orders', async (req, res) => {
    const scenario = String((req.body as { scenario?: string }).scenario ?? '') as Scenario;
    if (!(scenario in SCENARIOS)) return html(res, page('bad request', '<p>Unknown scenario.</p>'), 400);
    const placed = await placeOrder(options, scenario);
    if (!placed.ok) return void res.redirect(303, `/?notice=${encodeURIComponent(placed.problem)}`);
    if (scenario === 'cancel-after-payment') void cancelOncePaid(options, placed.orderId);
    res.redirect(303, `/orders/${placed.orderId}`);
  });

  app.get('/orders/:id', async (req, res) => {
    const timeline = /^[0-9a-f-]{36}$/.test(req.params.id) ? await orderTimeline(sources, req.params.id) : undefined;
    if (!timeline) return html(res, page('not found', '<p>No such order.</p>'), 404);
    html(res, req.query.fragment ? timelineFragment(timeline) : timelinePage(timeline));
  });

  // Live: the timeline is sent again whenever it changed — at once when the journal records
  // something of this order, and every two seconds for what only the databases show (an email
  // sent). Each tick reads only the journal entries newer than the last it saw. Live views are
  // bounded in number and in lifetime, so a page left open (or a hundred) cannot hold the
  // console's connections forever.
  let liveViews = 0;
  app.get('/orders/:id/live', async (req, res) => {
    const orderId = req.params.id;
    if (liveViews >= (options.maxLiveViews ?? 16)) {
      return void res.status(503).set('retry-after', '5').type('text/plain').send('too many live views are open');
    }
    const first = /^[0-9a-f-]{36}$/.test(orderId) ? await orderTimeline(sources, orderId) : undefined;
    if (!first) return void res.status(404).end();
    liveViews++;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive' });
    // What is true now, at once: a browser that connects again (after a restart of the console, a
    // dropped connection) may hold a page older than this.
    let shown = timelineFragment(first);
    const send = (fragment: string) => res.write(`event: change\ndata: ${JSON.stringify(fragment)}\n\n`);
    send(shown);
    let journal = first.journal;
    let closed = false;
    // The answer's close, not the request's: a request may count as closed once it has been read.
    res.on('close', () => (closed = true));
    const endsAt = Date.now() + (options.liveViewMs ?? 600_000);
    try {
      for (let tick = 1; !closed && Date.now() < endsAt; tick++) {
        await new Promise((resolve) => setTimeout(resolve, options.livePollMs ?? 500));
        try {
          const fresh = await withNewEntries(sources, first.correlationId, journal);
          journal = fresh.journal;
          if (!fresh.changed && tick % 4 !== 0) continue;
          const timeline = await orderTimeline(sources, orderId, journal);
          const fragment = timeline ? timelineFragment(timeline) : shown;
          if (fragment === shown) continue;
          shown = fragment;
          send(fragment);
        } catch {
          // Redis or a database is away for a moment: try again on the next tick.
        }
      }
    } finally {
      liveViews--;
      res.end();
    }
  });

  app.get('/faults', async (_req, res) => {
    const processes = await Promise.all(
      Object.entries(options.processes).map(([name, url]) => processFaults(name, url, switchesToken(name))),
    );
    const targets = [
      ...new Set(Object.values(subscriptions).flat()),
      'publisher',
      // Where a process publishes its outbox: right after its commit (handoff), or the relay's sweep.
      ...SERVICES.flatMap((s) => [`${s}.handoff`, `${s}.relay`]),
      'payments.worker',
      'notifications.dispatcher',
    ];
    html(res, faultsPage(processes, targets, Object.values(faultsTokens).some(Boolean)));
  });

  app.post('/faults/:process', async (req, res) => {
    const url = options.processes[req.params.process];
    if (!url) return html(res, page('not found', '<p>No such process.</p>'), 404);
    const body = req.body as Record<string, string | undefined>;
    if (!FAULT_NAMES.includes(body.name as FaultRule['name'])) return void res.status(400).send('unknown switch');
    const rule: FaultRule = {
      name: body.name as FaultRule['name'],
      probability: body.probability ? Number(body.probability) : 1,
      ...(body.target ? { target: body.target } : {}),
      ...(body.count ? { count: Number(body.count) } : {}),
    };
    const token = switchesToken(req.params.process);
    const current = await processFaults(req.params.process, url, token);
    await setRules(url, token, [...(current.state?.rules ?? []), rule], res);
  });

  app.post('/faults/:process/clear', async (req, res) => {
    const url = options.processes[req.params.process];
    if (!url) return html(res, page('not found', '<p>No such process.</p>'), 404);
    await setRules(url, switchesToken(req.params.process), [], res);
  });

  app.get('/lessons', async (_req, res) => {
    const lessons = options.lessons ? (await import('@idem/lessons')).LESSONS : undefined;
    html(res, lessonsPage(lessons));
  });

  app.post('/lessons/:name', async (req, res) => {
    if (!options.lessons) return html(res, lessonsPage(undefined), 404);
    const { LESSONS, runLesson } = await import('@idem/lessons');
    const name = req.params.name as keyof typeof LESSONS;
    if (!(name in LESSONS)) return html(res, page('not found', '<p>No such lesson.</p>'), 404);
    const runs = [await runLesson(name, 'wrong'), await runLesson(name, 'right')];
    html(res, lessonsPage(LESSONS, { name, runs }));
  });

  app.get('/explorer', (_req, res) => html(res, explorerPage(options.explorer ?? false)));

  // One exploration at a time: each makes and migrates a database of its own and holds a few
  // connections while it runs, and twenty at once took the server's last connections from the
  // services. Another meanwhile is told when to come back (429). One whose page is closed is given
  // up, its database dropped, before the next may start.
  let exploring = false;
  app.post('/explorer/:way', async (req, res) => {
    const way = req.params.way;
    if (!options.explorer) return html(res, explorerPage(false), 404);
    if (way !== 'right' && way !== 'wrong') return html(res, page('not found', '<p>No such way.</p>'), 404);
    if (exploring) {
      res.set('retry-after', String(EXPLORER_RETRY_AFTER_S));
      return html(res, explorerPage(true, undefined, EXPLORER_RETRY_AFTER_S), 429);
    }
    exploring = true;
    const run = new AbortController();
    // The answer's close before it was sent: whoever asked has gone.
    res.on('close', () => {
      if (!res.writableEnded) run.abort(new Error('the page that asked for the exploration was closed'));
    });
    try {
      // A checkout's package, never bundled into the console's image (which does not run it).
      const explorer = '@idem/explorer';
      const { cancelVersusReservation } = (await import(explorer)) as typeof Explorer;
      html(res, explorerPage(true, { way, ...(await cancelVersusReservation(way, { signal: run.signal })) }));
    } catch (error) {
      if (!run.signal.aborted) throw error; // abandoned: nobody waits for an answer
    } finally {
      exploring = false;
    }
  });

  app.get('/checker', async (_req, res) => {
    try {
      const report = await runChecks({
        databaseUrls: options.databaseUrls,
        ...(options.stripe ? { stripe: options.stripe } : {}),
        ...(options.mailApi ? { mailApi: options.mailApi } : {}),
        ...(options.adminToken ? { mailApiToken: options.adminToken } : {}),
        quietWindowMs: 30_000,
        stuckAfterMs: 120_000,
      });
      html(res, checkerPage(report));
    } catch (error) {
      html(res, checkerPage(undefined, `The checker could not read the system: ${(error as Error).message}`));
    }
  });

  app.use((error: unknown, _req: Request, res: Response, _next: () => void) => {
    html(
      res,
      page(
        'unavailable',
        `<p class="warn">The console could not read the system: ${escape((error as Error).message)}</p>`,
      ),
      503,
    );
  });

  return {
    app,
    listen(port: number): Promise<Server> {
      return new Promise((resolve, reject) => {
        const server = app.listen(port, options.host ?? '127.0.0.1', (error?: Error) =>
          error ? reject(error) : resolve(server),
        );
      });
    },
    async close() {
      redis.disconnect();
      await Promise.all(Object.values(sources.databases).map((pool) => pool.end()));
    },
  };
}

/** The opening tag of a form that posts. */
export const FORM_POST = /<form\b[^>]*\bmethod="post"[^>]*>/g;

/**
 * Every form of the console posts its token back (a synchronizer token, one per console
 * process): added here to each `<form method="post">` the pages render, so no form can be
 * written without it.
 */
function withFormToken(content: string, token: string): string {
  return content.replace(FORM_POST, (form) => `${form}<input type="hidden" name="csrf" value="${token}">`);
}

/** Refuses a form post without this console's token (403): it came from a page the console did not serve. */
function requireFormToken(token: string): RequestHandler {
  const expected = createHash('sha256').update(token).digest();
  return (req, res, next) => {
    if (req.method !== 'POST') return next();
    const sent = String((req.body as { csrf?: unknown } | undefined)?.csrf ?? '');
    if (timingSafeEqual(createHash('sha256').update(sent).digest(), expected)) return next();
    res.status(403).type('text/plain').send('Refused: this form did not come from a page of this console.');
  };
}

/** A process's fault switches, read with its service's switches token. */
async function processFaults(name: string, url: string, token: string | undefined): Promise<ProcessFaults> {
  if (!token) return { name, url, problem: "the console has no fault switches token for this process's service" };
  try {
    const res = await fetch(`${url}/faults`, { headers: { authorization: `Bearer ${token}` } });
    if (res.status === 404) return { name, url, problem: 'started without IDEM_FAULTS_ENABLED=1' };
    if (res.ok) return { name, url, state: (await res.json()) as NonNullable<ProcessFaults['state']> };
    return { name, url, problem: `it answered ${res.status} (is its FAULTS_TOKEN the console's for its service?)` };
  } catch {
    return { name, url, problem: 'not reachable (restarting?)' };
  }
}

async function setRules(url: string, token: string | undefined, rules: FaultRule[], res: Response) {
  if (token)
    await fetch(`${url}/faults`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ rules }),
    }).catch(() => undefined); // an unreachable process shows as such on the page
  res.redirect(303, '/faults');
}

const ORDERS: Record<Scenario, { sku: string; paymentMethod: string }> = {
  paid: { sku: 'keyboard', paymentMethod: 'pm_card_visa' },
  'out-of-stock': { sku: 'sold-out', paymentMethod: 'pm_card_visa' },
  declined: { sku: 'keyboard', paymentMethod: 'pm_card_chargeDeclined' },
  'cancel-after-payment': { sku: 'keyboard', paymentMethod: 'pm_card_visa' },
};

/** `Authorization` as the console's customer, when it was given a token. */
const asCustomer = (options: ConsoleOptions): { authorization?: string } =>
  options.customerToken ? { authorization: `Bearer ${options.customerToken}` } : {};

/**
 * Places a scenario's order as a careful client does: under one Idempotency-Key, sent again while
 * the orders API is unreachable (for a switch that kills the process right after the order's
 * commit — `crash-after-publish` under `pnpm start` — until it is started again, up to
 * `PLACE_RETRY_MS`): the repeat gets the first answer, never a second order.
 */
async function placeOrder(options: ConsoleOptions, scenario: Scenario) {
  const { sku, paymentMethod } = ORDERS[scenario];
  const key = randomUUID();
  const until = Date.now() + PLACE_RETRY_MS;
  for (;;) {
    try {
      const res = await fetch(`${options.ordersApi}/orders`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key, ...asCustomer(options) },
        body: JSON.stringify({
          paymentMethod,
          lines: [{ sku, quantity: 1 }],
        }),
      });
      if (res.status === 401) return { ok: false as const, problem: refusedCustomer(options, await res.text()) };
      if (res.status !== 201)
        return { ok: false as const, problem: `the orders API answered ${res.status}: ${await res.text()}` };
      return { ok: true as const, orderId: ((await res.json()) as { orderId: string }).orderId };
    } catch (error) {
      if (Date.now() > until)
        return { ok: false as const, problem: `the orders API is not reachable: ${(error as Error).message}` };
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}

/** Why the orders API refused the console as a customer, and what gives it a token that works. */
function refusedCustomer(options: ConsoleOptions, answer: string): string {
  if (!options.customerToken)
    return 'the console was given no customer token (CUSTOMER_TOKEN), and the orders API takes orders from customers only';
  return (
    `the orders API refused the console's customer token (401: ${answer}): it has expired or was signed with ` +
    'another key. Start the console again: whoever starts it (pnpm start, compose’s secrets step) mints a fresh one'
  );
}

/** When a second exploration is told to come back: about one run of the small space. */
const EXPLORER_RETRY_AFTER_S = 5;

/** How long the console sends an order again while the orders API does not answer. */
const PLACE_RETRY_MS = 20_000;

/** The cancel-after-payment scenario: waits for PAID (up to a minute), then cancels. */
async function cancelOncePaid(options: ConsoleOptions, orderId: string): Promise<void> {
  const auth = asCustomer(options);
  for (let i = 0; i < 120; i++) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    const res = await fetch(`${options.ordersApi}/orders/${orderId}`, { headers: auth }).catch(() => undefined);
    const status = res?.ok ? ((await res.json()) as { status: string }).status : undefined;
    if (status === 'PAID') {
      await fetch(`${options.ordersApi}/orders/${orderId}/cancel`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...auth },
        body: '{}',
      }).catch(() => undefined);
      return;
    }
    if (status && status !== 'PENDING' && status !== 'RESERVED') return;
  }
}
