import { randomUUID } from 'node:crypto';
import { inSpan } from '@idem/contracts';
import { claimLeased, takeHere } from '@idem/database';
import { noFaults, type Faults } from '@idem/faults';
import { pollingWorker, awaitAll, type BackgroundWorker, type Logger } from '@idem/runtime';
import type { PrismaClient } from '../db.js';
import { recordFailedSend, recordSent, WORK_ITEMS_CHANNEL, WORK_ITEMS_TABLE } from '../application/work-items.js';
import type { EmailWorkItem } from '../generated/prisma/client.js';
import { createSmtpClient, smtpFailureOf, type SmtpClient } from '../providers/smtp.js';

export interface DispatcherOptions {
  readonly db: PrismaClient;
  /** e.g. smtp://127.0.0.1:1025; credentials in the URL are never logged. */
  readonly smtpUrl: string;
  readonly from: string;
  readonly log: Logger;
  readonly now?: () => Date;
  readonly faults?: Faults;
  /** Sends per item before it is parked. @defaultValue 8 */
  readonly maxAttempts?: number;
  /** @defaultValue 60000 */
  readonly leaseMs?: number;
  /** @defaultValue 500 */
  readonly pollIntervalMs?: number;
  /** When given, the dispatcher LISTENs for new work items and takes them at once; it polls either way. */
  readonly databaseUrl?: string;
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

/** The dispatcher's settings with their defaults, its lease owner name and SMTP transport: what its steps share. */
type Dispatcher = Required<Omit<DispatcherOptions, 'smtpUrl' | 'databaseUrl'>> & {
  readonly owner: string;
  readonly smtp: SmtpClient;
};

/**
 * Drains email work items: claims due ones with a lease, sends each over SMTP with its stable
 * Message-ID, then marks it sent. SMTP has no idempotency: a crash after the server accepted
 * a message and before it is marked sent means one more send — with the same Message-ID, so
 * mail clients and the checker can recognise the copy. While it runs, the items its own process
 * writes are written leased to it and handed to it at their commit (`takeHere`): no claim and
 * no notification for them; the claims recover what a crash left, once its lease has run out.
 */
export function createDispatcher(options: DispatcherOptions): BackgroundWorker & { runOnce(): Promise<number> } {
  const {
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
  const settings = {
    ...options,
    now,
    faults,
    maxAttempts,
    leaseMs,
    pollIntervalMs,
    batchSize,
    smtpConnections,
    retryDelayMs,
    smtpTimeoutMs,
  };
  refuseALeaseTooShort(settings);
  const dispatcher: Dispatcher = {
    ...settings,
    owner: `dispatcher-${randomUUID()}`,
    smtp: createSmtpClient({ smtpUrl: options.smtpUrl, connections: smtpConnections, timeoutMs: smtpTimeoutMs }),
  };
  async function runOnce(): Promise<number> {
    const items = await claim(dispatcher);
    await awaitAll(items.map((item) => traced(dispatcher, item)));
    return items.length;
  }
  const { databaseUrl } = options;
  const worker = pollingWorker('email dispatcher', runOnce, {
    idleMs: pollIntervalMs,
    batchSize: dispatcher.batchSize,
    log: options.log,
    ...(databaseUrl ? { wakeOn: { databaseUrl, channel: WORK_ITEMS_CHANNEL } } : {}),
  });
  const own = ownItems(dispatcher);
  return {
    ...worker,
    start() {
      own.start();
      worker.start();
    },
    async stop() {
      await own.stop();
      await worker.stop();
      dispatcher.smtp.close();
    },
  };
}

/**
 * The items this dispatcher's own process writes, taken at their commit (`takeHere`): each is
 * sent at once, in its own trace; `stop` takes no more and waits for the sends under way.
 */
function ownItems(dispatcher: Dispatcher) {
  const sending = new Set<Promise<void>>();
  let stopTaking: (() => void) | undefined;
  return {
    start() {
      stopTaking = takeHere<EmailWorkItem>(dispatcher.db, WORK_ITEMS_TABLE, {
        owner: dispatcher.owner,
        leaseMs: dispatcher.leaseMs,
        take(item) {
          const send = traced(dispatcher, item).catch((error: unknown) =>
            dispatcher.log.error({ err: error, emailWorkItemId: item.id }, 'email not sent; its lease will run out'),
          );
          sending.add(send);
          void send.finally(() => sending.delete(send));
        },
      });
    },
    async stop() {
      stopTaking?.();
      await Promise.allSettled([...sending]);
    },
  };
}

function claim({ db, owner, leaseMs, batchSize, now }: Dispatcher): Promise<EmailWorkItem[]> {
  return claimLeased<EmailWorkItem>(db, {
    table: 'email_work_items',
    statuses: ['pending'],
    counter: 'attempts',
    owner,
    leaseMs,
    batchSize,
    now: now(),
  });
}

/** One e-mail, in the trace of the delivery that asked for it. */
const traced = (dispatcher: Dispatcher, item: EmailWorkItem) =>
  inSpan(
    'send email',
    { continues: item.traceparent, attributes: { 'idem.order_id': item.orderId, 'idem.email_kind': item.kind } },
    () => dispatch(dispatcher, item),
  );

async function dispatch(dispatcher: Dispatcher, item: EmailWorkItem): Promise<void> {
  const { db, from, log, now, smtp } = dispatcher;
  try {
    await inSpan('smtp send', { kind: 'client', attributes: smtp.server }, () =>
      smtp.send({
        from,
        to: item.toAddress,
        subject: item.subject,
        text: item.textBody,
        html: item.htmlBody,
        messageId: item.messageId,
      }),
    );
  } catch (error) {
    const { responseCode, reason } = smtpFailureOf(error);
    const status = await recordFailedSend(db, item, { ...dispatcher, responseCode, reason }, now());
    const parked = status === 'parked';
    log[parked ? 'error' : 'warn'](
      { emailWorkItemId: item.id, orderId: item.orderId, kind: item.kind, attempts: item.attempts, responseCode },
      parked ? 'email parked: it will not be retried on its own' : 'email not sent; will retry',
    );
    return;
  }
  // Accepted by the SMTP server, not yet marked: the window in which a crash sends one more copy.
  dispatcher.faults.crashIf('crash-after-send', 'notifications.dispatcher');
  await recordSent(db, item, now());
  log.info(
    { emailWorkItemId: item.id, orderId: item.orderId, kind: item.kind, messageId: item.messageId },
    'email sent',
  );
}

/**
 * The lease must outlast every send of the round, or a second dispatcher takes an item over while
 * the first one's send is still under way, and both send it.
 */
function refuseALeaseTooShort({
  leaseMs,
  batchSize,
  smtpConnections,
  smtpTimeoutMs,
}: {
  leaseMs: number;
  batchSize: number;
  smtpConnections: number;
  smtpTimeoutMs: number;
}): void {
  const roundMs = longestRoundMs({ batchSize, smtpConnections, smtpTimeoutMs });
  if (leaseMs <= roundMs) {
    throw new LeaseTooShortError(
      `DISPATCHER_LEASE_MS (${leaseMs}) must be longer than a round of sends can take: ` +
        `${Math.ceil(batchSize / smtpConnections)} sends per connection × 3 × SMTP_TIMEOUT_MS (${smtpTimeoutMs}) = ${roundMs} ms`,
    );
  }
}
