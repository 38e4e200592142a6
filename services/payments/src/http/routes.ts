import { HttpError, requireAdmin, validate } from '@idem/http';
import type { Express } from 'express';
import { z } from 'zod';
import type { PrismaClient } from '../db.js';

/** Payments know orders, not customers: both routes are the operator's. */
export function paymentRoutes(
  app: Express,
  { db, adminToken, now }: { db: PrismaClient; adminToken: string | undefined; now: () => Date },
): void {
  app.get('/payments', requireAdmin(adminToken), async (req, res) => {
    const { orderId } = validate(z.object({ orderId: z.uuid() }), req.query, 'query');
    const attempts = await db.paymentAttempt.findMany({ where: { orderId }, orderBy: { createdAt: 'asc' } });
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
  });

  // An operator who fixed an integration fault (see needs_attention) lets the worker try again,
  // with the attempt's persisted key: the refused request stored no result at the provider.
  app.post('/payments/:paymentAttemptId/retry', requireAdmin(adminToken), async (req, res) => {
    const { paymentAttemptId } = validate(z.object({ paymentAttemptId: z.uuid() }), req.params, 'path');
    const at = now();
    const { count } = await db.paymentAttempt.updateMany({
      where: { id: paymentAttemptId, status: 'needs_attention' },
      data: { status: 'pending', failureCode: null, failureReason: null, nextAttemptAt: at, updatedAt: at },
    });
    if (count === 0) throw new HttpError('not_found', 'no payment attempt with that id needs attention');
    res.status(202).json({ paymentAttemptId, status: 'pending' });
  });
}
