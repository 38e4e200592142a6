import { requireAdmin, validate } from '@idem/http';
import type { Express } from 'express';
import { z } from 'zod';
import type { PrismaClient } from '../db.js';

/** E-mails carry customers' addresses and are not tied to a customer here: an operator read. */
export function emailRoutes(
  app: Express,
  { db, adminToken }: { db: PrismaClient; adminToken: string | undefined },
): void {
  app.get('/emails', requireAdmin(adminToken), async (req, res) => {
    const { orderId } = validate(z.object({ orderId: z.uuid() }), req.query, 'query');
    const items = await db.emailWorkItem.findMany({ where: { orderId }, orderBy: { createdAt: 'asc' } });
    res.json({
      emails: items.map((i) => ({
        emailWorkItemId: i.id,
        dedupeKey: i.dedupeKey,
        kind: i.kind,
        orderId: i.orderId,
        to: i.toAddress,
        subject: i.subject,
        messageId: i.messageId,
        status: i.status,
        attempts: i.attempts,
        lastError: i.lastError,
        sentAt: i.sentAt?.toISOString() ?? null,
        createdAt: i.createdAt.toISOString(),
      })),
    });
  });
}
