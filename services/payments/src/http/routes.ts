import { answer, HttpError, requireOperator, route, type Operator } from '@idem/http';
import type { Express, RequestHandler } from 'express';
import { z } from 'zod';
import { paymentAttemptsOf, retryAttempt } from '../application/payment-attempts.js';
import type { PrismaClient } from '../db.js';

const payments = z.object({
  payments: z.array(
    z.object({
      paymentAttemptId: z.uuid(),
      orderId: z.uuid(),
      status: z.string(),
      amountCents: z.number().int(),
      currency: z.string(),
      paymentMethod: z.string(),
      paymentIntentId: z.string().nullable(),
      refundId: z.string().nullable(),
      failureCode: z.string().nullable(),
      failureReason: z.string().nullable(),
      providerCalls: z.number().int(),
      lastError: z.string().nullable(),
      createdAt: z.iso.datetime(),
      updatedAt: z.iso.datetime(),
    }),
  ),
});

/** Payments know orders, not customers: both routes are the operator's. */
export function paymentRoutes(
  app: Express,
  { db, operators, now }: { db: PrismaClient; operators: readonly Operator[]; now: () => Date },
): void {
  const admin = requireOperator(operators);
  route(
    app,
    {
      method: 'get',
      path: '/payments',
      summary: "An order's payment attempts, with the provider's ids, calls and last error",
      audience: 'operator',
      use: [admin],
      query: z.object({ orderId: z.uuid() }),
      responses: { 200: answer('`payments`, oldest first', payments) },
    },
    async ({ query: { orderId } }, _req, res) => {
      const attempts = await paymentAttemptsOf(db, orderId);
      res.json({
        payments: attempts.map((a) => ({
          paymentAttemptId: a.id,
          orderId: a.orderId,
          status: a.status,
          amountCents: a.amountCents,
          currency: a.currency,
          paymentMethod: a.paymentMethod,
          paymentIntentId: a.paymentIntentId,
          refundId: a.refundId,
          failureCode: a.failureCode,
          failureReason: a.failureReason,
          providerCalls: a.providerCalls,
          lastError: a.lastError,
          createdAt: a.createdAt.toISOString(),
          updatedAt: a.updatedAt.toISOString(),
        })),
      });
    },
  );

  retryRoute(app, { db, now, admin });
}

/** An operator gives a parked attempt back to the worker, with its persisted key. */
function retryRoute(
  app: Express,
  { db, now, admin }: { db: PrismaClient; now: () => Date; admin: RequestHandler },
): void {
  route(
    app,
    {
      method: 'post',
      path: '/payments/:paymentAttemptId/retry',
      summary: 'Try a parked attempt again, with its persisted key',
      audience: 'operator',
      use: [admin],
      params: z.object({ paymentAttemptId: z.uuid() }),
      responses: {
        202: answer(
          'The attempt is pending again',
          z.object({ paymentAttemptId: z.uuid(), status: z.literal('pending') }),
        ),
        404: 'No parked attempt with that id',
      },
    },
    async ({ params: { paymentAttemptId } }, _req, res) => {
      if ((await retryAttempt(db, paymentAttemptId, now())) === 'not_parked')
        throw new HttpError('not_found', 'no parked payment attempt with that id whose order is still to be paid');
      res.status(202).json({ paymentAttemptId, status: 'pending' });
    },
  );
}
