import { randomUUID } from 'node:crypto';
import { boundReason } from '@idem/contracts';
import { noFaults, type Faults } from '@idem/faults';
import { pollingWorker, settleAll, type BackgroundWorker, type Logger } from '@idem/runtime';
import nodemailer from 'nodemailer';
import type { PrismaClient } from './db.js';
import type { EmailWorkItem } from './generated/prisma/client.js';

export interface DispatcherOptions {
  readonly db: PrismaClient;
  /** e.g. smtp://127.0.0.1:1025; credentials in the URL are never logged. */
  readonly smtpUrl: string;
  readonly from: string;
  readonly log: Logger;
  readonly now?: () => Date;
  readonly faults?: Faults;
  /** Sends per item before it is marked dead. @defaultValue 8 */
  readonly maxAttempts?: number;
  /** @defaultValue 60000 */
  readonly leaseMs?: number;
  /** @defaultValue 500 */
  readonly pollIntervalMs?: number;
  /** Items claimed per round, all sent at once over the SMTP connection pool. @defaultValue 20 */
  readonly batchSize?: number;
  /** SMTP connections kept open. @defaultValue 5 */
  readonly smtpConnections?: number;
  /** First retry delay; doubles per attempt, at most 10 minutes. @defaultValue 1000 */
  readonly retryDelayMs?: number;
}

/**
 * Drains email work items: claims due ones with a lease, sends each over SMTP with its stable
 * Message-ID, then marks it sent. SMTP has no idempotency: a crash after the server accepted
 * a message and before it is marked sent means one more send — with the same Message-ID, so
 * mail clients and the checker can recognise the copy.
 */
export function createDispatcher(options: DispatcherOptions): BackgroundWorker & { runOnce(): Promise<number> } {
  const {
    db,
    smtpUrl,
    from,
    log,
    now = () => new Date(),
    faults = noFaults,
    maxAttempts = 8,
    leaseMs = 60_000,
    pollIntervalMs = 500,
    batchSize = 20,
    smtpConnections = 5,
    retryDelayMs = 1000,
  } = options;
  const owner = `dispatcher-${randomUUID()}`;
  // Pooled: a few SMTP connections kept open and shared, instead of one connection per email.
  const transport = nodemailer.createTransport({ url: smtpUrl, pool: true, maxConnections: smtpConnections });

  async function claim(): Promise<EmailWorkItem[]> {
    return db.$transaction(async (tx) => {
      const at = now();
      const due = await tx.$queryRaw<{ id: string }[]>`
        SELECT id FROM email_work_items
         WHERE status = 'pending' AND next_attempt_at <= ${at}
           AND (lease_expires_at IS NULL OR lease_expires_at < ${at})
         ORDER BY next_attempt_at
         LIMIT ${batchSize}
         FOR UPDATE SKIP LOCKED`;
      if (due.length === 0) return [];
      const ids = due.map((row) => row.id);
      await tx.emailWorkItem.updateMany({
        where: { id: { in: ids } },
        data: { leaseOwner: owner, leaseExpiresAt: new Date(at.getTime() + leaseMs), attempts: { increment: 1 } },
      });
      return tx.emailWorkItem.findMany({ where: { id: { in: ids } } });
    });
  }

  async function dispatch(item: EmailWorkItem): Promise<void> {
    try {
      await transport.sendMail({
        from,
        to: item.toAddress,
        subject: item.subject,
        text: item.textBody,
        html: item.htmlBody,
        messageId: item.messageId,
      });
    } catch (error) {
      const responseCode = (error as { responseCode?: number }).responseCode ?? 0;
      const permanent = responseCode >= 500 && responseCode < 600;
      const dead = permanent || item.attempts >= maxAttempts;
      const delay = Math.min(600_000, retryDelayMs * 2 ** Math.max(0, item.attempts - 1));
      await db.emailWorkItem.updateMany({
        where: { id: item.id, status: 'pending' },
        data: {
          status: dead ? 'dead' : 'pending',
          leaseOwner: null,
          leaseExpiresAt: null,
          lastError: boundReason((error as Error).message ?? String(error)),
          nextAttemptAt: new Date(now().getTime() + delay),
          updatedAt: now(),
        },
      });
      log[dead ? 'error' : 'warn'](
        { emailWorkItemId: item.id, orderId: item.orderId, kind: item.kind, attempts: item.attempts, responseCode },
        dead ? 'email is dead: it will not be retried' : 'email not sent; will retry',
      );
      return;
    }
    // Accepted by the SMTP server, not yet marked: the window in which a crash sends one more copy.
    faults.crashIf('crash-after-send', 'notifications.dispatcher');
    await db.emailWorkItem.updateMany({
      where: { id: item.id, status: 'pending' },
      data: {
        status: 'sent',
        sentAt: now(),
        leaseOwner: null,
        leaseExpiresAt: null,
        lastError: null,
        updatedAt: now(),
      },
    });
    log.info(
      { emailWorkItemId: item.id, orderId: item.orderId, kind: item.kind, messageId: item.messageId },
      'email sent',
    );
  }

  async function runOnce(): Promise<number> {
    const items = await claim();
    await settleAll(items.map(dispatch));
    return items.length;
  }

  const worker = pollingWorker('email dispatcher', runOnce, { idleMs: pollIntervalMs, log });
  return {
    ...worker,
    async stop() {
      await worker.stop();
      transport.close();
    },
  };
}
