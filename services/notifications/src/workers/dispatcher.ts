import { randomUUID } from 'node:crypto';
import { inSpan } from '@idem/contracts';
import { claimLeased, takeHere } from '@idem/database';
import { noFaults, type Faults } from '@idem/faults';
import { awaitAll, pollingWorker, type BackgroundWorker, type Logger } from '@idem/runtime';
import type { PrismaClient } from '../db.js';
import {
  giveBack,
  holdForSending,
  recordFailedSend,
  recordSent,
  WORK_ITEMS_CHANNEL,
  WORK_ITEMS_TABLE,
} from '../application/work-items.js';
import type { EmailWorkItem } from '../generated/prisma/client.js';
import { createSmtpClient, smtpFailureOf, type SmtpClient } from '../providers/smtp.js';

export interface DispatcherOptions {
  readonly db: PrismaClient;
  /** e.g. smtp://127.0.0.1:1025; credentials in the URL are never logged. */
  readonly smtpUrl: string;
  /**
   * The provider's message search (Mailpit's API: Mailpit's or the SMTP sink's address), asked
   * before an email whose last send has an unknown outcome is sent again. Without it, such an
   * email is sent again and the possible copy counted. @defaultValue none
   */
  readonly lookupUrl?: string;
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
  /** Items claimed per round at most (never more than the sends free to start). @defaultValue 20 */
  readonly batchSize?: number;
  /**
   * SMTP connections kept open: the sends under way at once, one per connection, and so the pace
   * of a backlog (SMTP_CONNECTIONS). @defaultValue 5
   */
  readonly smtpConnections?: number;
  /** First retry delay; doubles per attempt, at most 10 minutes. @defaultValue 1000 */
  readonly retryDelayMs?: number;
  /** Each of SMTP's waits (connecting, the greeting, any silence after): a send that stalls longer fails. @defaultValue 4000 */
  readonly smtpTimeoutMs?: number;
}

/** A lease that one send could outlast: another dispatcher would claim the item and send it again. */
export class LeaseTooShortError extends Error {
  readonly code = 'lease_too_short';
}

/** The longest one send can take: it may wait out the connection, greeting and socket timeouts. */
export const longestSendMs = (smtpTimeoutMs: number): number => 3 * smtpTimeoutMs;

/** The dispatcher's settings with their defaults, its lease owner name, SMTP transport and sends under way. */
type Dispatcher = Required<Omit<DispatcherOptions, 'smtpUrl' | 'lookupUrl' | 'databaseUrl'>> & {
  readonly owner: string;
  readonly smtp: SmtpClient;
  readonly sends: Sends;
  /** Its last claim took all it had room for: more is due, and is taken in due order. */
  draining: boolean;
};

/**
 * Drains email work items: claims due ones with a lease, sends each over SMTP with its stable
 * Message-ID, then marks it sent. SMTP has no idempotency: a crash after the server accepted
 * a message and before it is marked sent, or a reply lost on the way, leaves the outcome unknown.
 * Where the provider can be searched (`lookupUrl`) the next attempt looks the Message-ID up
 * before anything is sent again; elsewhere it means one more send — with the same Message-ID,
 * so mail clients and the checker can recognise the copy. While it runs, the items its own process
 * writes are written leased to it and handed to it at their commit (`takeHere`): no claim and
 * no notification for them; the claims recover what a crash left, once its lease has run out.
 *
 * Never more sends are under way than it has SMTP connections, and an item is leased to it only
 * while a send of it can start at once: nothing waits in a queue while its lease runs out (the
 * way a slow server once made a second dispatcher send a copy). What it cannot start now it
 * leaves for a later round: a handed-over item is given back, and a claim takes no more than the
 * sends free. Right before each send the lease is checked to outlast it (and renewed if not).
 *
 * A backlog drains at the pace of its connections: a claim that took all it had room for is
 * followed by another as soon as a send ends (not by a poll), so every connection stays busy
 * while anything is due, and the oldest due is claimed first.
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
  refuseALeaseTooShort({ leaseMs, smtpTimeoutMs });
  const dispatcher: Dispatcher = {
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
    owner: `dispatcher-${randomUUID()}`,
    smtp: createSmtpClient({
      smtpUrl: options.smtpUrl,
      connections: smtpConnections,
      timeoutMs: smtpTimeoutMs,
      ...(options.lookupUrl ? { lookupUrl: options.lookupUrl } : {}),
    }),
    sends: new Sends(smtpConnections),
    draining: false,
  };
  const { databaseUrl } = options;
  const worker = pollingWorker('email dispatcher', () => round(dispatcher), {
    idleMs: pollIntervalMs,
    log: options.log,
    ...(databaseUrl ? { wakeOn: { databaseUrl, channel: WORK_ITEMS_CHANNEL } } : {}),
  });
  const own = ownItems(dispatcher, () => worker.wake());
  return {
    ...worker,
    runOnce: () => wholeRound(dispatcher),
    start() {
      own.start();
      worker.start();
    },
    async stop() {
      own.stop();
      await worker.stop();
      await dispatcher.sends.settled();
      dispatcher.smtp.close();
    },
  };
}

/**
 * One round: claims as many due items as sends can start now and starts them. The room is held
 * until the claimed sends start, so an item handed over meanwhile cannot take it. A claim that
 * took all it had room for may have left more due: the round ends when a send does, and the next
 * claims at once (`moreDue`). A shorter claim took all that was due: the sends go on while the
 * worker waits for a notification or its poll.
 */
async function round(dispatcher: Dispatcher): Promise<{ handled: number; moreDue: boolean; started: Promise<void>[] }> {
  const { sends, log } = dispatcher;
  const room = Math.min(dispatcher.batchSize, sends.free);
  // No room (sends of handed-over items fill it): claim once one ends, whatever is due by then.
  if (room <= 0) {
    await sends.oneEnded();
    return { handled: 0, moreDue: true, started: [] };
  }
  const release = sends.hold(room);
  let items: EmailWorkItem[];
  try {
    items = await claim(dispatcher, room);
  } catch (error) {
    release();
    throw error;
  }
  const started = items.map((item) => {
    const send = sends.run(() => traced(dispatcher, item));
    send.catch((error: unknown) =>
      log.error({ err: error, emailWorkItemId: item.id }, 'email send not recorded; its lease will run out'),
    );
    return send;
  });
  release();
  dispatcher.draining = items.length === room;
  if (dispatcher.draining) await sends.oneEnded();
  return { handled: items.length, moreDue: dispatcher.draining, started };
}

/**
 * One round whose sends have all ended when it returns (rejecting with the first that failed
 * unexpectedly): what tests and the explorer step through.
 */
async function wholeRound(dispatcher: Dispatcher): Promise<number> {
  const { handled, started } = await round(dispatcher);
  await awaitAll(started);
  await dispatcher.sends.settled();
  return handled;
}

/** The sends under way, at most one per SMTP connection: a send that cannot start now is not queued. */
class Sends {
  readonly #underWay = new Set<Promise<void>>();
  readonly #waiting: (() => void)[] = [];
  #held = 0;
  constructor(private readonly capacity: number) {}

  /** How many more may start now. */
  get free(): number {
    return this.capacity - this.#underWay.size - this.#held;
  }

  /** Holds `room` for sends about to start (a claim under way); returns what gives it back. */
  hold(room: number): () => void {
    this.#held += room;
    return () => void (this.#held -= room);
  }

  /** Starts `send` (a slot must be free: see `free`); resolves when it has ended. */
  run(send: () => Promise<void>): Promise<void> {
    const running = send().finally(() => {
      this.#underWay.delete(running);
      for (const ended of this.#waiting.splice(0)) ended();
    });
    this.#underWay.add(running);
    return running;
  }

  /** Resolves when a send under way ends (at once when none is): a slot is free again. */
  oneEnded(): Promise<void> {
    if (this.#underWay.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  settled(): Promise<unknown> {
    return Promise.allSettled([...this.#underWay]);
  }
}

/**
 * The items this dispatcher's own process writes, taken at their commit (`takeHere`): each is
 * sent at once, in its own trace, when a send can start; otherwise, or while a backlog drains
 * (older items are due: a new one must not pass them), it is given back and the worker woken
 * (`claimNow`), so a claim takes it in its turn — a claim under way as it was given back may not
 * have seen it, and no notification announces it. `stop` takes no more (the sends under way are
 * the dispatcher's to wait for).
 */
function ownItems(dispatcher: Dispatcher, claimNow: () => void) {
  const { db, owner, leaseMs, log, sends } = dispatcher;
  let stopTaking: (() => void) | undefined;
  const failed = (item: EmailWorkItem, message: string) => (error: unknown) =>
    log.error({ err: error, emailWorkItemId: item.id }, message);
  return {
    start() {
      stopTaking = takeHere<EmailWorkItem>(db, WORK_ITEMS_TABLE, {
        owner,
        leaseMs,
        take(item) {
          if (sends.free > 0 && !dispatcher.draining)
            void sends
              .run(() => traced(dispatcher, item))
              .catch(failed(item, 'email not sent; its lease will run out'));
          else
            void giveBack(db, item, owner).then(claimNow, failed(item, 'email not given back; its lease will run out'));
        },
      });
    },
    stop() {
      stopTaking?.();
    },
  };
}

/** Up to `room` due items (as many as sends can start now): the rest stay for a later round, unleased. */
function claim({ db, owner, leaseMs, now }: Dispatcher, room: number): Promise<EmailWorkItem[]> {
  return claimLeased<EmailWorkItem>(db, {
    table: 'email_work_items',
    statuses: ['pending'],
    counter: 'attempts',
    takeovers: 'unconfirmed_sends',
    owner,
    leaseMs,
    batchSize: room,
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
  const { db, from, log, now, smtp, owner, leaseMs } = dispatcher;
  const reconciled = await reconcile(dispatcher, item);
  if (reconciled === 'done') return;
  // Ours for longer than the send can take, with its text: or not sent by us now.
  const held = await holdForSending(db, item, {
    owner,
    leaseMs,
    sendMs: longestSendMs(dispatcher.smtpTimeoutMs),
    now: now(),
  });
  if (held.kind !== 'held') {
    if (held.kind === 'lost') log.warn({ emailWorkItemId: item.id }, 'email not sent: its lease ran out before it');
    return;
  }
  const { email, leaseExpiresAt } = held;
  try {
    await inSpan('smtp send', { kind: 'client', attributes: smtp.server }, () =>
      smtp.send({
        from,
        to: email.toAddress,
        subject: email.subject,
        text: email.text,
        html: email.html,
        messageId: item.messageId,
      }),
    );
  } catch (error) {
    const failure = smtpFailureOf(error);
    const status = await recordFailedSend(db, item, { ...dispatcher, ...failure, ...reconciled }, now());
    const parked = status === 'parked';
    log[parked ? 'error' : 'warn'](
      {
        emailWorkItemId: item.id,
        orderId: item.orderId,
        kind: item.kind,
        attempts: item.attempts,
        responseCode: failure.responseCode,
        unconfirmed: failure.unconfirmed,
      },
      parked ? 'email parked: it will not be retried on its own' : 'email not sent; will retry',
    );
    return;
  }
  // Accepted by the SMTP server, not yet marked: the window in which a crash sends one more copy.
  dispatcher.faults.crashIf('crash-after-send', 'notifications.dispatcher');
  const overran = now() > leaseExpiresAt;
  await recordSent(db, item, { overran, ...reconciled }, now());
  if (overran)
    log.error(
      { emailWorkItemId: item.id, orderId: item.orderId, kind: item.kind, messageId: item.messageId },
      'email sent after its lease ran out: another dispatcher may have sent it too',
    );
  log.info(
    { emailWorkItemId: item.id, orderId: item.orderId, kind: item.kind, messageId: item.messageId },
    'email sent',
  );
}

/**
 * An item whose last send has an unknown outcome (its reply lost, or its dispatcher gone mid-send:
 * more unconfirmed sends than lookups have settled) is looked up at the provider by its Message-ID
 * before it is sent again, as payments searches before it creates again. Found: it is marked sent
 * and nothing is sent (`done`). Not found: it is sent, and the lookup is recorded with the send's
 * outcome (`reconciled`, the unconfirmed sends it settled). A lookup that fails sends nothing: the
 * attempt fails and is retried (`done`), except the last, which sends rather than park the email.
 * Without a lookup, or at a provider that offers none, the item is sent again, the copy counted.
 * The claim's lease outlasts the lookup (one SMTP timeout) and still holds a send after it.
 */
async function reconcile(dispatcher: Dispatcher, item: EmailWorkItem): Promise<'done' | { reconciled?: number }> {
  const { db, log, now, smtp } = dispatcher;
  if (!smtp.lookup || item.unconfirmedSends <= item.reconciledSends) return {};
  const reconciled = item.unconfirmedSends;
  const about = { emailWorkItemId: item.id, orderId: item.orderId, kind: item.kind, messageId: item.messageId };
  let accepted: boolean | undefined;
  try {
    accepted = await inSpan('smtp lookup', { kind: 'client' }, () => smtp.lookup!(item.messageId));
  } catch (error) {
    // Never parked for want of an answer: the last attempt sends, and the copy it may make is counted.
    if (item.attempts >= dispatcher.maxAttempts) {
      log.warn(
        { ...about, err: error },
        'the provider could not say whether it took the email: sent on the last attempt',
      );
      return {};
    }
    const reason = `lookup failed: ${(error as Error)?.message ?? String(error)}`;
    await recordFailedSend(db, item, { ...dispatcher, responseCode: 0, reason, unconfirmed: false }, now());
    log.warn({ ...about, err: error }, 'email not sent: the provider could not say whether it took it; will retry');
    return 'done';
  }
  if (accepted === undefined) {
    log.warn(about, 'the provider offers no message search: sent again, the copy counted');
    return {};
  }
  if (!accepted) return { reconciled };
  await recordSent(db, item, { overran: false, reconciled }, now());
  log.info(about, 'email found at the provider: marked sent, not sent again');
  return 'done';
}

/**
 * The lease must outlast one send, or a second dispatcher takes an item over while the first
 * one's send is still under way, and both send it.
 */
function refuseALeaseTooShort({ leaseMs, smtpTimeoutMs }: { leaseMs: number; smtpTimeoutMs: number }): void {
  const sendMs = longestSendMs(smtpTimeoutMs);
  if (leaseMs <= sendMs) {
    throw new LeaseTooShortError(
      `DISPATCHER_LEASE_MS (${leaseMs}) must be longer than a send can take: ` +
        `3 × SMTP_TIMEOUT_MS (${smtpTimeoutMs}) = ${sendMs} ms`,
    );
  }
}
