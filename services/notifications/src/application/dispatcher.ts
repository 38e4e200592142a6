import { randomUUID } from 'node:crypto';
import { boundReason, inSpan } from '@idem/contracts';
import { claimLeased } from '@idem/database';
import { noFaults, type Faults } from '@idem/faults';
import { pollingWorker, settleAll, type BackgroundWorker, type Logger } from '@idem/runtime';
import nodemailer from 'nodemailer';
import type { PrismaClient } from '../db.js';
import { afterFailedSend } from '../domain/email-work-item.js';
import type { EmailWorkItem } from '../generated/prisma/client.js';

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
  /** Each of SMTP's waits (connecting, the greeting, any silence after): a send that stalls longer fails. @defaultValue 4000 */
  readonly smtpTimeoutMs?: number;
}

/** A lease that a round of sends could outlast: another dispatcher would claim the items and send them again. */
export class LeaseTooShortError extends Error {
  readonly code = 'lease_too_short';
}

/**
 * The longest a claimed round can take: its items queue over the pooled connections, and each
 * send may wait out the connection, greeting and socket timeouts.
 */
export function longestRoundMs({
  batchSize,
  smtpConnections,
  smtpTimeoutMs,
}: {
  batchSize: number;
  smtpConnections: number;
  smtpTimeoutMs: number;
}): number {
  return Math.ceil(batchSize / smtpConnections) * 3 * smtpTimeoutMs;
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
    smtpTimeoutMs = 4000,
  } = options;
  // The lease must outlast every send of the round, or a second dispatcher takes an item over
  // while the first one's send is still under way, and both send it.
  const roundMs = longestRoundMs({ batchSize, smtpConnections, smtpTimeoutMs });
  if (leaseMs <= roundMs) {
    throw new LeaseTooShortError(
      `DISPATCHER_LEASE_MS (${leaseMs}) must be longer than a round of sends can take: ` +
        `${Math.ceil(batchSize / smtpConnections)} sends per connection × 3 × SMTP_TIMEOUT_MS (${smtpTimeoutMs}) = ${roundMs} ms`,
    );
  }
  const owner = `dispatcher-${randomUUID()}`;
  const connection = connectionOf(smtpUrl);
  // Pooled: a few SMTP connections kept open and shared, instead of one connection per email.
  // Nodemailer waits minutes by default; these waits are what the lease covers.
  const transport = nodemailer.createTransport({
    ...connection, // nodemailer ignores the options below beside a `url`
    pool: true,
    maxConnections: smtpConnections,
    connectionTimeout: smtpTimeoutMs,
    greetingTimeout: smtpTimeoutMs,
    socketTimeout: smtpTimeoutMs,
  });

  async function claim(): Promise<EmailWorkItem[]> {
    const ids = await claimLeased(db, {
      table: 'email_work_items',
      statuses: ['pending'],
      counter: 'attempts',
      owner,
      leaseMs,
      batchSize,
      now: now(),
    });
    if (ids.length === 0) return [];
    return db.emailWorkItem.findMany({ where: { id: { in: ids } }, orderBy: { nextAttemptAt: 'asc' } });
  }

  // The mail server, for the SMTP client span (never the recipient: customer data stays out of traces).
  const server = { 'server.address': connection.host, 'server.port': connection.port };

  async function dispatch(item: EmailWorkItem): Promise<void> {
    try {
      await inSpan('smtp send', { kind: 'client', attributes: server }, () =>
        transport.sendMail({
          from,
          to: item.toAddress,
          subject: item.subject,
          text: item.textBody,
          html: item.htmlBody,
          messageId: item.messageId,
        }),
      );
    } catch (error) {
      const responseCode = (error as { responseCode?: number }).responseCode ?? 0;
      const { status, retryInMs } = afterFailedSend(item, { responseCode, maxAttempts, retryDelayMs });
      const dead = status === 'dead';
      await db.emailWorkItem.updateMany({
        where: { id: item.id, status: 'pending' },
        data: {
          status,
          leaseOwner: null,
          leaseExpiresAt: null,
          lastError: boundReason((error as Error).message ?? String(error)),
          nextAttemptAt: new Date(now().getTime() + retryInMs),
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

  /** One e-mail, in the trace of the delivery that asked for it. */
  const traced = (item: EmailWorkItem) =>
    inSpan(
      'send email',
      { continues: item.traceparent, attributes: { 'idem.order_id': item.orderId, 'idem.email_kind': item.kind } },
      () => dispatch(item),
    );

  async function runOnce(): Promise<number> {
    const items = await claim();
    await settleAll(items.map(traced));
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

/** smtp://user:password@host:port (smtps:// for TLS from the start) as nodemailer's connection options. */
function connectionOf(smtpUrl: string) {
  const url = new URL(smtpUrl);
  const secure = url.protocol === 'smtps:';
  return {
    host: url.hostname,
    port: Number(url.port || (secure ? 465 : 587)),
    secure,
    ...(url.username
      ? { auth: { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) } }
      : {}),
  };
}
