import { validate } from '@idem/http';
import type { Express } from 'express';
import { z } from 'zod';
import type { PrismaClient } from '../db.js';

export function paymentRoutes(app: Express, { db }: { db: PrismaClient }): void {
  app.get('/payments', async (req, res) => {
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
}
