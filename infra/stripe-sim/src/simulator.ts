import { createHash, randomBytes } from 'node:crypto';
import { localToolGuard, operatorOnlyBeyondLoopback } from '@idem/http';
import express, { type Express, type Request, type Response } from 'express';

/**
 * A Stripe-compatible payment simulator: the subset of the API idem's payments service uses,
 * form-encoded like the real API and answered in Stripe's shapes, so the official `stripe`
 * SDK talks to it unchanged. State lives in memory and is lost on restart.
 */

/**
 * The only API key the simulator accepts. A real Stripe key sent here is refused: nothing may
 * believe it talks to Stripe while it talks to the simulator.
 */
export const SIMULATOR_API_KEY = 'sk_test_idem_simulator';

export interface SimulatorFaults {
  /** Chance that a new PaymentIntent or refund is created and its idempotent result stored, but this answer is a 500. */
  errorAfterCreate: number;
  /** Chance that a new PaymentIntent or refund is created and stored, then the connection is dropped without an answer. */
  dropAfterCreate: number;
}

export interface SimulatorOptions {
  readonly faults?: Partial<SimulatorFaults>;
  /** Extra time each create takes, so a concurrent request with the same key sees it in flight. @defaultValue 0 */
  readonly latencyMs?: number;
  /** How long a `pm_usBankAccount` payment stays `processing`. @defaultValue 500 */
  readonly processingMs?: number;
  readonly random?: () => number;
  /**
   * Names it answers to besides 127.0.0.1, localhost and [::1] on its own port (a compose
   * service name, a published port): it listens on a developer's machine. @defaultValue none
   */
  readonly allowedHosts?: readonly string[];
  /**
   * The only API key it accepts. On this machine the public placeholder will do; bound beyond
   * loopback (`host`) it needs one of its own (`sk_test_idem_simulator_…`), which then also
   * guards its `/_sim` controls. @defaultValue the placeholder, sk_test_idem_simulator
   */
  readonly apiKey?: string;
  /** The address it binds. @defaultValue 127.0.0.1 */
  readonly host?: string;
}

interface PaymentIntent {
  id: string;
  object: 'payment_intent';
  amount: number;
  amount_received: number;
  currency: string;
  status: 'succeeded' | 'requires_payment_method' | 'processing';
  payment_method: string;
  confirmation_method: 'automatic';
  capture_method: 'automatic';
  created: number;
  latest_charge: string | null;
  last_payment_error: StripeErrorBody | null;
  livemode: false;
  metadata: Record<string, string>;
}

interface Refund {
  id: string;
  object: 'refund';
  amount: number;
  currency: string;
  payment_intent: string;
  charge: string | null;
  status: 'succeeded';
  created: number;
  metadata: Record<string, string>;
}

interface StripeErrorBody {
  type: 'card_error' | 'invalid_request_error' | 'idempotency_error' | 'api_error' | 'authentication_error';
  message: string;
  code?: string;
  decline_code?: string;
  param?: string;
  payment_intent?: PaymentIntent;
  doc_url?: string;
}

interface StoredResult {
  fingerprint: string;
  inFlight: boolean;
  status: number;
  body: unknown;
}

/** Stripe's test payment methods that this simulator knows, and how each ends. */
const PAYMENT_METHODS: Record<string, 'succeeds' | 'declines' | 'processes'> = {
  /** A bank debit: `processing` at first, `succeeded` once `processingMs` have passed (read it again). */
  pm_usBankAccount: 'processes',
  pm_card_visa: 'succeeds',
  pm_card_mastercard: 'succeeds',
  pm_card_chargeDeclined: 'declines',
  pm_card_visa_chargeDeclined: 'declines',
};

export interface StripeSimulator {
  readonly app: Express;
  readonly paymentIntents: () => PaymentIntent[];
  readonly refunds: () => Refund[];
  setFaults(faults: Partial<SimulatorFaults>): void;
  /** Forgets every idempotency key, as Stripe does after about 24 hours. */
  expireIdempotencyKeys(): void;
  reset(): void;
}

/**
 * The API key of a request, the two ways Stripe takes it: `Authorization: Bearer <key>`, or HTTP
 * Basic with the key as the user name and an empty password (`curl -u sk_test_…:`, Stripe's own
 * documented form). The scheme is case-insensitive (RFC 7235).
 */
function apiKeyOf(authorization: string): string | undefined {
  const [, scheme, credentials] = /^(\w+) +(\S+)$/.exec(authorization) ?? [];
  if (scheme?.toLowerCase() === 'bearer') return credentials;
  if (scheme?.toLowerCase() !== 'basic' || !credentials) return undefined;
  const [user, password] = Buffer.from(credentials, 'base64').toString('utf8').split(/:(.*)/s);
  return user && !password ? user : undefined;
}

class StripeFailure extends Error {
  constructor(
    readonly status: number,
    readonly body: StripeErrorBody,
  ) {
    super(body.message);
  }
}

export function createStripeSimulator(options: SimulatorOptions = {}): StripeSimulator {
  const random = options.random ?? Math.random;
  let faults: SimulatorFaults = { errorAfterCreate: 0, dropAfterCreate: 0, ...options.faults };
  const intents = new Map<string, PaymentIntent>();
  const refunds = new Map<string, Refund>();
  const idempotency = new Map<string, StoredResult>();
  const processingUntil = new Map<string, number>();

  const app = express();
  app.disable('x-powered-by');
  // A page in the developer's browser may neither read it (Host) nor change it (/_sim, Origin).
  const apiKey = options.apiKey ?? SIMULATOR_API_KEY;
  app.use(localToolGuard({ allowedHosts: options.allowedHosts ?? [] }));
  // Beyond loopback the placeholder (public: it is in this repository) admits nobody.
  app.use(
    operatorOnlyBeyondLoopback({
      host: options.host ?? '127.0.0.1',
      tokens: apiKey === SIMULATOR_API_KEY ? [] : [apiKey],
      what: 'STRIPE_SIM_API_KEY, a key of its own (sk_test_idem_simulator_…)',
    }),
  );
  app.use(express.urlencoded({ extended: true }));
  app.use((req, res, next) => {
    res.set('Request-Id', `req_${id()}`);
    if (req.path.startsWith('/_sim') || req.path === '/health') return next();
    const key = apiKeyOf(req.get('authorization') ?? '');
    if (!key) {
      return void sendError(res, 401, {
        type: 'authentication_error',
        message:
          'You did not provide an API key. Provide it in the Authorization header as Bearer <key>, or as the user name of HTTP Basic authentication with an empty password (curl -u <key>:).',
      });
    }
    if (key !== apiKey) {
      return void sendError(res, 401, {
        type: 'authentication_error',
        message: `Invalid API Key provided: ${key.slice(0, 8)}****. This is idem's Stripe simulator: it accepts only ${apiKey === SIMULATOR_API_KEY ? `its placeholder key ${SIMULATOR_API_KEY}` : 'its own key (STRIPE_SIM_API_KEY)'}, never a real one.`,
      });
    }
    next();
  });

  /**
   * Stripe's idempotency: the first result for a key is stored and replayed for the same key
   * and parameters; other parameters under the same key are refused; a request while the first
   * is still executing gets 409. Requests that fail validation store nothing.
   */
  function idempotent(create: (req: Request) => { status: number; body: unknown }) {
    return async (req: Request, res: Response) => {
      const key = req.get('idempotency-key');
      const fingerprint = hash(`${req.method} ${req.path} ${JSON.stringify(sortKeys(req.body ?? {}))}`);
      if (key) {
        res.set('Idempotency-Key', key);
        const stored = idempotency.get(key);
        if (stored?.inFlight) {
          return sendError(res, 409, {
            type: 'idempotency_error',
            code: 'idempotency_key_in_use',
            message: 'There is currently another in-progress request using this idempotency key. Try again later.',
          });
        }
        if (stored && stored.fingerprint !== fingerprint) {
          return sendError(res, 400, {
            type: 'idempotency_error',
            message: `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${key}' if you meant to execute a different request.`,
          });
        }
        if (stored) {
          res.set('Idempotent-Replayed', 'true');
          return void res.status(stored.status).json(stored.body);
        }
      }
      const entry: StoredResult | undefined = key ? { fingerprint, inFlight: true, status: 0, body: null } : undefined;
      if (key && entry) idempotency.set(key, entry);
      let result: { status: number; body: unknown };
      try {
        if (options.latencyMs) await new Promise((resolve) => setTimeout(resolve, options.latencyMs));
        result = create(req);
      } catch (error) {
        // A decline is a result, stored and replayed like a success; anything else stores nothing.
        if (!(error instanceof StripeFailure && error.body.type === 'card_error')) {
          if (key) idempotency.delete(key);
          if (error instanceof StripeFailure) return sendError(res, error.status, error.body);
          throw error;
        }
        result = { status: error.status, body: { error: error.body } };
      }
      if (entry) Object.assign(entry, { inFlight: false, ...result });
      if (random() < faults.dropAfterCreate) return void req.socket.destroy();
      if (random() < faults.errorAfterCreate) {
        return sendError(res, 500, {
          type: 'api_error',
          message: 'An unknown error occurred (simulated after the object was created).',
        });
      }
      res.status(result.status).json(result.body);
    };
  }

  app.post(
    '/v1/payment_intents',
    idempotent((req) => {
      const params = req.body as Record<string, unknown>;
      const amount = positiveInteger(params.amount, 'amount');
      const currency = requiredString(params.currency, 'currency').toLowerCase();
      if (!/^[a-z]{3}$/.test(currency)) invalid(`Invalid currency: ${currency}.`, 'currency');
      const paymentMethod = requiredString(params.payment_method, 'payment_method');
      const outcome = PAYMENT_METHODS[paymentMethod];
      if (!outcome) invalid(`No such PaymentMethod: '${paymentMethod}'`, 'payment_method', 'resource_missing');
      if (params.confirm !== 'true') invalid('This simulator only supports confirm=true.', 'confirm');
      // Stripe's rule for accounts with redirect-based payment methods enabled (the default):
      // confirming server-side needs a return_url, explicit payment_method_types, or
      // redirects turned off.
      const automatic = params.automatic_payment_methods as Record<string, unknown> | undefined;
      const noRedirects = automatic?.enabled === 'true' && automatic.allow_redirects === 'never';
      if (!noRedirects && params.payment_method_types === undefined && params.return_url === undefined) {
        invalid(
          "This PaymentIntent is configured to accept payment methods enabled in your Dashboard. Because some of these payment methods might redirect your customer off of your page, you must provide a `return_url`. If you don't want to accept redirect-based payment methods, set `automatic_payment_methods[enabled]` to `true` and `automatic_payment_methods[allow_redirects]` to `never` when creating Setup Intents and Payment Intents.",
          'return_url',
        );
      }
      const intent: PaymentIntent = {
        id: `pi_${id()}`,
        object: 'payment_intent',
        amount,
        amount_received: 0,
        currency,
        status: 'requires_payment_method',
        payment_method: paymentMethod,
        confirmation_method: 'automatic',
        capture_method: 'automatic',
        created: Math.floor(Date.now() / 1000),
        latest_charge: `ch_${id()}`,
        last_payment_error: null,
        livemode: false,
        metadata: stringRecord(params.metadata),
      };
      intents.set(intent.id, intent);
      if (outcome === 'declines') {
        const error: StripeErrorBody = {
          type: 'card_error',
          code: 'card_declined',
          decline_code: 'generic_decline',
          message: 'Your card was declined.',
          doc_url: 'https://stripe.com/docs/error-codes/card-declined',
        };
        intent.last_payment_error = error;
        throw new StripeFailure(402, { ...error, payment_intent: intent });
      }
      if (outcome === 'processes') {
        intent.status = 'processing';
        processingUntil.set(intent.id, Date.now() + (options.processingMs ?? 500));
        return { status: 200, body: { ...intent } };
      }
      Object.assign(intent, { status: 'succeeded', amount_received: amount });
      return { status: 200, body: intent };
    }),
  );

  // Stripe's search, for the one query idem makes: metadata['<key>']:'<value>'.
  app.get('/v1/payment_intents/search', (req, res) => {
    const query = typeof req.query.query === 'string' ? req.query.query : '';
    const match = /^metadata\['([\w-]+)'\]:'([^']*)'$/.exec(query.trim());
    if (!match)
      return sendError(res, 400, {
        type: 'invalid_request_error',
        message: `This simulator searches only metadata['key']:'value', not: ${query}`,
        param: 'query',
      });
    const data = [...intents.values()].filter((intent) => intent.metadata[match[1]!] === match[2]);
    res.json({ object: 'search_result', url: '/v1/payment_intents/search', has_more: false, data });
  });

  app.get('/v1/payment_intents/:id', (req, res) => {
    const intent = intents.get(req.params.id);
    if (!intent) return sendError(res, 404, missing('payment_intent', req.params.id));
    if (intent.status === 'processing' && Date.now() >= (processingUntil.get(intent.id) ?? 0)) {
      Object.assign(intent, { status: 'succeeded', amount_received: intent.amount });
    }
    res.json(intent);
  });

  app.get('/v1/payment_intents', (req, res) => void res.json(list(req, '/v1/payment_intents', [...intents.values()])));

  app.post(
    '/v1/refunds',
    idempotent((req) => {
      const params = req.body as Record<string, unknown>;
      const intentId = requiredString(params.payment_intent, 'payment_intent');
      const intent = intents.get(intentId);
      if (!intent) throw new StripeFailure(404, missing('payment_intent', intentId));
      if (intent.status !== 'succeeded')
        invalid(`PaymentIntent ${intentId} has no successful charge to refund.`, 'payment_intent');
      const refunded = [...refunds.values()]
        .filter((r) => r.payment_intent === intentId)
        .reduce((sum, r) => sum + r.amount, 0);
      const amount = params.amount === undefined ? intent.amount - refunded : positiveInteger(params.amount, 'amount');
      if (amount <= 0 || refunded + amount > intent.amount) {
        invalid(`Charge ${intent.latest_charge} has already been refunded.`, 'amount', 'charge_already_refunded');
      }
      const refund: Refund = {
        id: `re_${id()}`,
        object: 'refund',
        amount,
        currency: intent.currency,
        payment_intent: intentId,
        charge: intent.latest_charge,
        status: 'succeeded',
        created: Math.floor(Date.now() / 1000),
        metadata: stringRecord(params.metadata),
      };
      refunds.set(refund.id, refund);
      return { status: 200, body: refund };
    }),
  );

  app.get('/v1/refunds', (req, res) => {
    const intent = typeof req.query.payment_intent === 'string' ? req.query.payment_intent : undefined;
    res.json(
      list(
        req,
        '/v1/refunds',
        [...refunds.values()].filter((r) => !intent || r.payment_intent === intent),
      ),
    );
  });

  // Simulator controls (not Stripe): faults and a reset, for tests and demos.
  app.post('/_sim/faults', express.json(), (req, res) => {
    faults = { ...faults, ...(req.body as Partial<SimulatorFaults>) };
    res.json(faults);
  });
  // Stripe forgets idempotency keys after about 24 hours; this forgets them now.
  app.post('/_sim/expire-idempotency-keys', (_req, res) => {
    idempotency.clear();
    res.status(204).end();
  });
  app.delete('/_sim/state', (_req, res) => {
    reset();
    res.status(204).end();
  });
  app.get('/health', (_req, res) => void res.json({ status: 'ok' }));

  app.use((req, res) =>
    sendError(res, 404, {
      type: 'invalid_request_error',
      message: `Unrecognized request URL (${req.method}: ${req.path}).`,
    }),
  );

  function reset() {
    intents.clear();
    refunds.clear();
    idempotency.clear();
  }

  return {
    app,
    paymentIntents: () => [...intents.values()],
    refunds: () => [...refunds.values()],
    setFaults: (next) => void (faults = { ...faults, ...next }),
    expireIdempotencyKeys: () => idempotency.clear(),
    reset,
  };
}

/** Stripe list semantics: newest first, `limit` (1–100, default 10), `starting_after` an id. */
function list<T extends { id: string; created: number }>(req: Request, url: string, items: T[]) {
  const limit = Math.min(100, Math.max(1, Number(req.query.limit ?? 10) || 10));
  const ordered = [...items].reverse();
  const after = typeof req.query.starting_after === 'string' ? req.query.starting_after : undefined;
  const start = after ? ordered.findIndex((item) => item.id === after) + 1 : 0;
  const data = ordered.slice(start, start + limit);
  return { object: 'list', url, has_more: start + limit < ordered.length, data };
}

function sendError(res: Response, status: number, error: StripeErrorBody): void {
  res.status(status).json({ error });
}

function invalid(message: string, param: string, code?: string): never {
  throw new StripeFailure(400, { type: 'invalid_request_error', message, param, ...(code ? { code } : {}) });
}

function missing(object: string, id: string): StripeErrorBody {
  return {
    type: 'invalid_request_error',
    code: 'resource_missing',
    message: `No such ${object}: '${id}'`,
    param: 'id',
  };
}

function requiredString(value: unknown, param: string): string {
  if (typeof value !== 'string' || value.length === 0)
    invalid(`Missing required param: ${param}.`, param, 'parameter_missing');
  return value;
}

function positiveInteger(value: unknown, param: string): number {
  const number = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(number) || number <= 0) invalid(`Invalid positive integer: ${param}.`, param);
  return number;
}

function stringRecord(value: unknown): Record<string, string> {
  if (typeof value !== 'object' || value === null) return {};
  return Object.fromEntries(
    Object.entries(value).filter((entry): entry is [string, string] => typeof entry[1] === 'string'),
  );
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value)
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([k, v]) => [k, sortKeys(v)]),
    );
  }
  return value;
}

function hash(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function id(): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  return [...randomBytes(24)].map((b) => alphabet[b % alphabet.length]).join('');
}
