import {
  addressOf,
  answer,
  authenticate,
  callerOf,
  correlationIdOf,
  HttpError,
  rateLimit,
  route,
  validate,
  type Caller,
  type CustomerTokens,
  type Operator,
} from '@idem/http';
import { skuSchema } from '@idem/shop';
import type { Express, Request, Response } from 'express';
import type { RedisClient } from '@idem/messaging';
import { z } from 'zod';
import { cancelOrder } from '../application/cancel-order.js';
import { findOrder, listOrders, type OrderView, type Owner } from '../application/orders.js';
import { placeOrder, type CatalogAsLastRead, type PlaceOrderResult } from '../application/place-order.js';
import type { PrismaClient } from '../db.js';
import { ORDER_STATUSES } from '../domain/order-status.js';

/**
 * A field a client may believe it sets, which the server decides instead: refused with the
 * reason, never silently ignored, so a client that thinks it sets prices learns it does not.
 */
const decidedByTheServer = (reason: string) => z.never({ error: reason }).optional().describe(`Never sent: ${reason}`);
const FROM_THE_CATALOG = "prices come from the catalog (GET /catalog): send each line's sku and quantity only";

/** An order as every route answers it (application/orders.ts `OrderView`). */
const order = z.object({
  orderId: z.uuid(),
  status: z.enum(ORDER_STATUSES),
  version: z.number().int(),
  customerId: z.string(),
  customerEmail: z.string(),
  currency: z.string(),
  paymentMethod: z.string(),
  totalCents: z.number().int(),
  lines: z.array(z.object({ sku: z.string(), quantity: z.number().int(), unitPriceCents: z.number().int() })),
  createdAt: z.iso.datetime(),
  updatedAt: z.iso.datetime(),
  history: z
    .array(
      z.object({
        version: z.number().int(),
        status: z.string(),
        causationId: z.uuid().nullable(),
        reason: z.string().optional(),
        occurredAt: z.iso.datetime(),
      }),
    )
    .optional(),
});

const newOrderSchema = z.strictObject({
  // A Stripe PaymentMethod id: what can never be one is refused here, not by the provider minutes later.
  paymentMethod: z
    .string()
    .regex(/^pm_[A-Za-z0-9_]{1,96}$/, 'a payment method id: "pm_" then letters, digits and "_" (e.g. pm_card_visa)')
    .default('pm_card_visa'),
  lines: z
    .array(
      z.strictObject({
        sku: skuSchema,
        quantity: z.number().int().positive().max(10_000),
        unitPriceCents: decidedByTheServer(FROM_THE_CATALOG),
      }),
    )
    .min(1)
    .max(100),
  totalCents: decidedByTheServer(FROM_THE_CATALOG),
  currency: decidedByTheServer("the currency is the catalog's, the same for every line of an order"),
  customerEmail: decidedByTheServer("the receipt goes to the email claim of the customer's token"),
});

const orderIdParam = z.object({ id: z.uuid() });
const idempotencyKeyHeader = z.string().min(1).max(255).optional();
const correlationIdHeader = {
  description: 'Carried on every message the request causes (a UUID; another value is replaced by a new one)',
  schema: z.string().optional(),
};

export interface OrderRoutesOptions {
  readonly db: PrismaClient;
  readonly now: () => Date;
  readonly idempotencyKeyRetentionMs: number;
  /** Who may call: customers with a token, operators with theirs (ADMIN_TOKEN, ADMIN_TOKENS). */
  readonly tokens: CustomerTokens;
  readonly operators: readonly Operator[];
  /** Counts `POST /orders` per customer and per address, across instances. */
  readonly redis: RedisClient;
  readonly rateLimits: {
    readonly prefix: string;
    readonly perCustomer: number;
    readonly perAddress: number;
    readonly cancelsPerCustomer: number;
    readonly windowMs: number;
  };
}

/**
 * The orders API. Every route needs a caller: a customer reaches only their own orders
 * (another's answers 404, as if it did not exist); the operator reads and cancels any order
 * but places none, since an order is always some customer's.
 */
export function orderRoutes(app: Express, options: OrderRoutesOptions): void {
  requireACaller(app, options);
  placeOrderRoute(app, options);
  readOrderRoutes(app, options);
  cancelOrderRoute(app, options);
}

function requireACaller(app: Express, { tokens, operators }: OrderRoutesOptions) {
  // Registered before the routes, so express runs it first on every /orders path: no handler
  // ever sees a request without a caller. (An address whose requests keep failing to
  // authenticate is stopped before this, on every route of every service: the runtime's app.)
  app.use('/orders', authenticate({ tokens, operators }));
}

function placeOrderRoute(app: Express, { db, now, idempotencyKeyRetentionMs, redis, rateLimits }: OrderRoutesOptions) {
  // What every placing shares, the catalog as this process last read it among them.
  const catalog: CatalogAsLastRead = new Map();
  const shared = { now, keyRetentionMs: idempotencyKeyRetentionMs, catalog };
  // Counted before any database work (a flood costs Redis round trips, not transactions); a
  // repeat with the same Idempotency-Key counts too.
  const limitPlacing = rateLimit({
    redis,
    prefix: rateLimits.prefix,
    limits: [
      {
        per: 'customer',
        points: rateLimits.perCustomer,
        windowMs: rateLimits.windowMs,
        keyOf: (_req, res) => customerOf(res).customerId,
      },
      { per: 'address', points: rateLimits.perAddress, windowMs: rateLimits.windowMs, keyOf: addressOf },
    ],
  });

  route(
    app,
    {
      method: 'post',
      path: '/orders',
      summary:
        "Place an order: SKUs and quantities, priced from the catalog; the receipt goes to the token's email (its order-placed event commits with it)",
      audience: 'customer',
      use: [limitPlacing],
      headers: {
        'Idempotency-Key': {
          description:
            'Repeats with this key and body replay the first answer (Idempotent-Replayed: true); scoped per customer',
          schema: idempotencyKeyHeader,
        },
        'X-Correlation-Id': correlationIdHeader,
      },
      body: newOrderSchema,
      responses: {
        201: answer('The order, PENDING, at the prices it was placed at', order),
        403: 'The token carries no email claim: there is nowhere to send the receipt',
        409: 'A request with this Idempotency-Key is still in progress',
        422: 'A line the catalog cannot sell (unknown or withdrawn SKU, another currency, too large a total), named in `errors`; or this Idempotency-Key was used with another body',
        429: 'Too many orders from this customer or address (Retry-After)',
      },
    },
    async ({ body: { paymentMethod, lines } }, req, res) => {
      const customer = customerOf(res);
      if (!customer.email) {
        throw new HttpError(
          'forbidden',
          "the token carries no email claim: an order's receipt goes to the customer's own address, so ask the identity provider for the email scope",
        );
      }
      const response = await placeOrder(db, {
        order: { customerId: customer.customerId, customerEmail: customer.email, paymentMethod, lines },
        correlationId: correlationIdOf(req, res),
        idempotency: idempotencyOf(req, { paymentMethod, lines }),
        ...shared,
      });
      answerPlaced(res, response, req.get('idempotency-key'));
    },
  );
}

function readOrderRoutes(app: Express, { db }: OrderRoutesOptions) {
  route(
    app,
    {
      method: 'get',
      path: '/orders/:id',
      summary: "An order with its lines and status history (another customer's answers 404)",
      audience: 'customer-or-operator',
      params: orderIdParam,
      responses: { 200: answer('The order, with its status history', order), 404: 'No such order of this caller' },
    },
    async ({ params: { id } }, _req, res) => {
      const order = await findOrder(db, id, ownerOf(callerOf(res)));
      if (!order) throw new HttpError('not_found', `no order ${id}`);
      res.json(order);
    },
  );

  route(
    app,
    {
      method: 'get',
      path: '/orders',
      summary: "The caller's orders, newest first, a page at a time (the operator's: every order)",
      audience: 'customer-or-operator',
      query: z.object({
        limit: z.coerce.number().int().min(1).max(100).default(20),
        cursor: z.string().max(200).optional(),
      }),
      responses: {
        200: answer(
          '`orders` and the `nextCursor` of the next page (null on the last)',
          z.object({ orders: z.array(order), nextCursor: z.string().nullable() }),
        ),
      },
    },
    async ({ query: { limit, cursor } }, _req, res) => {
      const orders = await listOrders(db, {
        owner: ownerOf(callerOf(res)),
        limit,
        before: cursor ? decodeCursor(cursor) : undefined,
      });
      const last = orders.at(-1);
      res.json({ orders, nextCursor: orders.length === limit && last ? encodeCursor(last) : null });
    },
  );
}

function cancelOrderRoute(app: Express, { db, now, redis, rateLimits }: OrderRoutesOptions) {
  const limitCancelling = rateLimit({
    redis,
    prefix: rateLimits.prefix,
    limits: [
      {
        per: 'caller (cancels)',
        points: rateLimits.cancelsPerCustomer,
        windowMs: rateLimits.windowMs,
        keyOf: (_req, res) => callerKey(callerOf(res)),
      },
    ],
  });

  route(
    app,
    {
      method: 'post',
      path: '/orders/:id/cancel',
      summary: 'Cancel an order (a paid one is refunded); cancelling again answers the cancelled order',
      audience: 'customer-or-operator',
      use: [limitCancelling],
      params: orderIdParam,
      headers: { 'X-Correlation-Id': correlationIdHeader },
      body: z.object({ reason: z.string().max(500).default('cancelled by the customer') }),
      responses: {
        200: answer('The order, CANCELLED', order),
        404: 'No such order of this caller',
        409: 'Too late to cancel',
        429: 'Too many cancels from this caller (Retry-After)',
      },
    },
    async ({ params: { id }, body: { reason } }, req, res) => {
      const result = await cancelOrder(db, {
        orderId: id,
        reason,
        owner: ownerOf(callerOf(res)),
        correlationId: correlationIdOf(req, res),
        now,
      });
      if (result.kind === 'unknown_order') throw new HttpError('not_found', `no order ${id}`);
      if (result.kind === 'too_late')
        throw new HttpError('conflict', `order ${id} is ${result.status} and can no longer be cancelled`);
      res.json(result.order);
    },
  );
}

/** What placing answers: the order (201, or the replay of the key's first answer), or why not. */
/**
 * The request's Idempotency-Key and what makes two requests the same one: what the customer sent
 * (the same body is the same request, whatever their token's address is by the time they retry).
 */
function idempotencyOf(req: Request, body: unknown) {
  const key = validate(idempotencyKeyHeader, req.get('idempotency-key'), 'header.Idempotency-Key');
  return key === undefined ? undefined : { key, request: { method: 'POST', path: '/orders', body } };
}

function answerPlaced(res: Response, response: PlaceOrderResult, key: string | undefined): void {
  if (response.kind === 'key_in_flight')
    throw new HttpError(
      'idempotency_key_in_flight',
      `a request with Idempotency-Key "${key}" is still being processed`,
    );
  if (response.kind === 'key_reused')
    throw new HttpError('idempotency_key_reused', `Idempotency-Key "${key}" was already used with a different request`);
  if (response.kind === 'refused') {
    const errors = response.refusals.map(({ line, reason }) => ({ field: `body.lines[${line}]`, message: reason }));
    throw new HttpError('order_refused', errors.map((e) => `${e.field}: ${e.message}`).join('; '), { errors });
  }
  if (response.replayed) res.set('Idempotent-Replayed', 'true');
  res.status(201).json(response.order);
}

/** Whom a limit counts: each customer, each operator. */
const callerKey = (caller: Caller) =>
  caller.kind === 'customer' ? `customer:${caller.customerId}` : `operator:${caller.name}`;

/** A customer's orders; the operator's reach is every order. */
const ownerOf = (caller: Caller): Owner => (caller.kind === 'customer' ? caller.customerId : undefined);

/** The customer calling; the operator places no orders. */
function customerOf(res: Response): Extract<Caller, { kind: 'customer' }> {
  const caller = callerOf(res);
  if (caller.kind !== 'customer')
    throw new HttpError('forbidden', 'orders are placed by customers, with a customer token');
  return caller;
}

function encodeCursor(order: OrderView): string {
  return Buffer.from(`${order.createdAt}|${order.orderId}`).toString('base64url');
}

function decodeCursor(cursor: string): { createdAt: Date; id: string } {
  const [createdAt, id] = Buffer.from(cursor, 'base64url').toString().split('|');
  const parsed = z.object({ createdAt: z.iso.datetime(), id: z.uuid() }).safeParse({ createdAt, id });
  if (!parsed.success) {
    throw new HttpError('invalid_request', 'cursor is not one this API returned', {
      errors: [{ field: 'query.cursor', message: 'invalid cursor' }],
    });
  }
  return { createdAt: new Date(parsed.data.createdAt), id: parsed.data.id };
}
