import { answer, requireOperator, route, type Operator } from '@idem/http';
import type { Express } from 'express';
import { z } from 'zod';
import { emailWorkItemsOf } from '../application/work-items.js';
import type { PrismaClient } from '../db.js';

const emails = z.object({
  emails: z.array(
    z.object({
      emailWorkItemId: z.uuid(),
      businessKey: z.string(),
      kind: z.string(),
      orderId: z.uuid(),
      /** Null while the email waits for its order's summary (an email about a payment that came first). */
      to: z.string().nullable(),
      subject: z.string().nullable(),
      messageId: z.string(),
      status: z.string(),
      attempts: z.number().int(),
      lastError: z.string().nullable(),
      sentAt: z.iso.datetime().nullable(),
      createdAt: z.iso.datetime(),
    }),
  ),
});

/** E-mails carry customers' addresses and are not tied to a customer here: an operator read. */
export function emailRoutes(
  app: Express,
  { db, operators }: { db: PrismaClient; operators: readonly Operator[] },
): void {
  route(
    app,
    {
      method: 'get',
      path: '/emails',
      summary: "An order's e-mail work items: kind, status, attempts, stable Message-ID",
      audience: 'operator',
      use: [requireOperator(operators)],
      query: z.object({ orderId: z.uuid() }),
      responses: { 200: answer('`emails`, oldest first', emails) },
    },
    async ({ query: { orderId } }, _req, res) => {
      const items = await emailWorkItemsOf(db, orderId);
      res.json({
        emails: items.map((i) => ({
          emailWorkItemId: i.id,
          businessKey: i.businessKey,
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
    },
  );
}
