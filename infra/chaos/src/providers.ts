import { randomInt, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatReport, listStripe, type Report } from '@idem/checker';
import { dropDatabase, readOnly } from '@idem/database';
import {
  asCustomer,
  describeSystem,
  getJson,
  QUICK_TAKEOVER_ENV,
  SERVICES,
  startSystem,
  UNLIMITED_ORDERS_ENV,
  type RunningSystem,
} from '@idem/native-run';
import { SIMULATOR_API_KEY } from '@idem/stripe-sim';
import { cancelWithRetries, checkQuietSystem, CUSTOMER, FINAL, placeWithRetries } from './chaos.js';
import { startFaultProxy, type FaultProxy } from './fault-proxy.js';

/**
 * The providers' faults: the whole system as processes, orders placed at a steady rate, while the
 * mail server is slow (each message accepted `smtpSlowMs` after it was sent, its link delaying
 * every chunk `smtpLinkSlowMs`) and then unreachable or a black hole, and the payment provider is
 * unreachable while a share of the orders is cancelled. What must hold when it is quiet again: no
 * email received twice that an unconfirmed send no lookup settled does not explain (a reply lost
 * as the connections were cut, with no way to ask the server), no PaymentIntent created after its
 * order's cancellation, every PAID order's receipt sent, every cancelled order's money back,
 * nothing dead-lettered, the checker clean. Bounded in count and time; it only talks to this machine.
 */
export interface ProviderFaultsOptions {
  readonly ordersPerSecond: number;
  readonly seconds: number;
  /** How long the SMTP server takes to accept each message, from the start. @defaultValue 0 */
  readonly smtpSlowMs?: number;
  /** How long the link to the SMTP server delays every chunk, each way, until a black hole. @defaultValue 0 */
  readonly smtpLinkSlowMs?: number;
  /** When the SMTP server becomes unreachable (connections refused), and for how long (seconds). */
  readonly smtpDown?: { readonly at: number; readonly for: number };
  /**
   * When the link to the SMTP server becomes a black hole (connections accepted, nothing
   * forwarded: replies on their way are lost), and for how long (seconds); after, it passes
   * straight through.
   */
  readonly smtpBlackHole?: { readonly at: number; readonly for: number };
  /** When the payment provider becomes unreachable, and for how long (seconds). */
  readonly stripeDown: { readonly at: number; readonly for: number };
  /** @defaultValue 0.33 */
  readonly cancelShare?: number;
  /** How long to wait for everything to end after the orders. @defaultValue 300 */
  readonly drainSeconds?: number;
  readonly log?: (line: string) => void;
}

/**
 * The providers' scenarios, one definition each: CI runs the short ones (`e2e/providers.e2e.spec.ts`),
 * `pnpm chaos --providers [--full]` the long ones.
 */
export const PROVIDER_SCENARIOS = {
  /** CI: the SMTP server slow to accept and then unreachable, Stripe unreachable. */
  slowThenDown: {
    ordersPerSecond: 10,
    seconds: 40,
    smtpSlowMs: 300,
    smtpDown: { at: 12, for: 25 },
    stripeDown: { at: 5, for: 20 },
  },
  /** CI: replies lost as the SMTP link turns from slow to a black hole (the lookup's case). */
  lostReplies: {
    ordersPerSecond: 5,
    seconds: 30,
    smtpLinkSlowMs: 150,
    smtpBlackHole: { at: 10, for: 10 },
    stripeDown: { at: 5, for: 5 },
    cancelShare: 0.2,
  },
  /** `pnpm chaos --providers`: 20 orders/s for 2 minutes, the link slow, a black hole, then down. */
  standard: {
    ordersPerSecond: 20,
    seconds: 120,
    smtpLinkSlowMs: 150,
    smtpBlackHole: { at: 30, for: 45 },
    smtpDown: { at: 80, for: 20 },
    stripeDown: { at: 20, for: 60 },
    drainSeconds: 900,
  },
  /** `pnpm chaos --providers --full`: the outside check's scenario, 900 orders at 10/s. */
  outsideCheck: {
    ordersPerSecond: 10,
    seconds: 90,
    smtpLinkSlowMs: 300,
    smtpBlackHole: { at: 30, for: 60 },
    stripeDown: { at: 20, for: 60 },
    drainSeconds: 900,
  },
} as const satisfies Record<string, ProviderFaultsOptions>;

export interface ProviderFaultsReport {
  readonly ordersPlaced: number;
  readonly cancels: number;
  readonly endedByStatus: Record<string, number>;
  /** PaymentIntents the provider created after their order's cancellation was recorded in payments (beyond a call already under way). */
  readonly chargedAfterCancel: string[];
  /** PAID orders with no receipt received by the mail server. */
  readonly paidWithoutReceipt: string[];
  readonly deadLetters: number;
  readonly emails: EmailCopies;
  readonly checker: Report;
  readonly logFile: string;
  readonly ok: boolean;
}

/** The emails the mail server received more than once, beside what the work items counted. */
export interface EmailCopies {
  /** Copies beyond the first, all emails together. */
  readonly copies: number;
  /** Sends whose outcome was never learnt, and of them those a lookup at the server settled. */
  readonly unconfirmedSends: number;
  readonly reconciledSends: number;
  /** Emails with more copies than their unsettled unconfirmed sends explain. */
  readonly unexplained: string[];
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const SKUS = ['keyboard', 'mouse', 'monitor', 'cable'];

export async function runProviderFaults(options: ProviderFaultsOptions): Promise<ProviderFaultsReport> {
  const log = options.log ?? ((line: string) => console.log(line));
  return withSystem('providers', log, async ({ system, proxies, logFile }) => {
    await mailSink(system, 'slow-answers', { ms: options.smtpSlowMs ?? 0 });
    proxies.smtp.slow(options.smtpLinkSlowMs ?? 0);
    const started = Date.now();
    const at = (seconds: number) => sleep(Math.max(0, started + seconds * 1000 - Date.now()));
    const { smtpDown, smtpBlackHole } = options;
    const outages = Promise.all([
      smtpDown &&
        at(smtpDown.at)
          .then(() => log('providers: SMTP unreachable'))
          .then(() => proxies.smtp.down(smtpDown.for * 1000)),
      smtpBlackHole &&
        at(smtpBlackHole.at)
          .then(() => log('providers: SMTP a black hole'))
          .then(() => proxies.smtp.blackHole(smtpBlackHole.for * 1000))
          .then(() => log('providers: SMTP passes straight through')),
      at(options.stripeDown.at)
        .then(() => log('providers: Stripe unreachable'))
        .then(() => proxies.stripe.down(options.stripeDown.for * 1000)),
    ]);
    const { orderIds, cancels } = await placeAtRate(
      system,
      options.ordersPerSecond,
      options.seconds,
      options.cancelShare ?? 0.33,
    );
    await outages;
    log(`providers: ${orderIds.length} orders placed, ${cancels} cancels; draining`);
    return drainAndCheck(system, orderIds, cancels, logFile, options.drainSeconds ?? 300);
  });
}

/**
 * A backlog: notifications is stopped while `orders` orders are placed and paid, then started
 * again with every queue full. Every receipt must be sent, nothing dead-lettered — whichever of an
 * order's messages it takes first.
 */
export async function runNotificationsBacklog(options: {
  readonly orders: number;
  readonly ordersPerSecond: number;
  readonly drainSeconds?: number;
  readonly log?: (line: string) => void;
}): Promise<ProviderFaultsReport> {
  const log = options.log ?? ((line: string) => console.log(line));
  return withSystem('backlog', log, async ({ system, logFile }) => {
    const notifications = await stopNotifications(system);
    log(`backlog: notifications stopped; placing ${options.orders} orders`);
    const { orderIds } = await placeAtRate(
      system,
      options.ordersPerSecond,
      options.orders / options.ordersPerSecond,
      0,
    );
    await waitForFinal(system, orderIds, Date.now() + 600_000);
    log('backlog: every order ended; starting notifications again');
    for (const part of notifications) await system.restart(part);
    return drainAndCheck(system, orderIds, 0, logFile, options.drainSeconds ?? 300);
  });
}

/** Stops every notifications process of `system` (SIGTERM, waiting for each to exit); returns their parts. */
async function stopNotifications(system: RunningSystem): Promise<string[]> {
  const notifications = [...system.processes.keys()].filter((part) => part.startsWith('notifications'));
  await Promise.all(
    notifications.map(async (part) => {
      const child = system.processes.get(part)!;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }),
  );
  return notifications;
}

/** How long a notifications pause under load took to drain, once notifications was back. */
export interface PauseDrain {
  readonly pauseSeconds: number;
  /** Emails owed for the orders placed up to the restart: the backlog, and those before it. */
  readonly owedEmails: number;
  /** From the restart until every one of them was sent; undefined when the drain did not end in time. */
  readonly drainedAfterSeconds: number | undefined;
  /** Drained within as long as the pause lasted: a backlog drains while orders keep coming. */
  readonly withinPause: boolean;
}

/**
 * A pause under load: orders placed (and paid) at a steady rate throughout; `leadSeconds` in,
 * notifications is stopped for `pauseSeconds` and started again, and the orders keep coming while
 * it drains what waited. Measured: how long after the restart every email owed for the orders
 * placed until then is sent (its order-received and receipt); the target is no longer than the
 * pause. Then the same checks as the other runs once it is quiet.
 */
export async function runNotificationsPause(options: {
  readonly ordersPerSecond: number;
  readonly pauseSeconds: number;
  /** @defaultValue 5 */
  readonly leadSeconds?: number;
  /** How long to wait after the restart for the backlog, and then for everything. @defaultValue 2 × the pause + 60 */
  readonly drainSeconds?: number;
  readonly log?: (line: string) => void;
}): Promise<ProviderFaultsReport & { readonly pause: PauseDrain }> {
  const log = options.log ?? ((line: string) => console.log(line));
  const { ordersPerSecond, pauseSeconds } = options;
  const drainSeconds = options.drainSeconds ?? 2 * pauseSeconds + 60;
  return withSystem('pause', log, async ({ system, logFile }) => {
    const placing = placeUntilStopped(system, ordersPerSecond);
    await sleep((options.leadSeconds ?? 5) * 1000);
    const notifications = await stopNotifications(system);
    log(`pause: notifications stopped for ${pauseSeconds} s at ${ordersPerSecond} orders/s`);
    await sleep(pauseSeconds * 1000);
    const owedFor = await placing.placedSoFar();
    for (const part of notifications) await system.restart(part);
    const restartedAt = Date.now();
    log(`pause: notifications started again; ${owedFor.length} orders placed so far`);
    const count = (service: 'notifications' | 'payments', table: string, status: string) =>
      readOnly(
        system.databaseUrls[service],
        async (q) =>
          (
            await q<{ n: number }>(
              `SELECT count(*)::int AS n FROM ${table} WHERE status = '${status}' AND order_id = ANY($1::uuid[])`,
              [owedFor],
            )
          )[0]!.n,
      );
    // Each order's "order received", and the receipt of each one whose payment was captured.
    const owed = async () => owedFor.length + (await count('payments', 'payment_attempts', 'captured'));
    let owedEmails = await owed();
    let drainedAfterSeconds: number | undefined;
    while (Date.now() < restartedAt + drainSeconds * 1000) {
      owedEmails = await owed();
      if ((await count('notifications', 'email_work_items', 'sent')) >= owedEmails) {
        drainedAfterSeconds = (Date.now() - restartedAt) / 1000;
        break;
      }
      await sleep(500);
    }
    log(`pause: ${drainedAfterSeconds === undefined ? 'not drained' : `drained in ${drainedAfterSeconds} s`}`);
    const orderIds = await placing.stop();
    const report = await drainAndCheck(system, orderIds, 0, logFile, drainSeconds);
    const withinPause = drainedAfterSeconds !== undefined && drainedAfterSeconds <= pauseSeconds;
    return { ...report, pause: { pauseSeconds, owedEmails, drainedAfterSeconds, withinPause } };
  });
}

/** Places paid orders at `perSecond` until stopped; `placedSoFar` is every order placed by then. */
function placeUntilStopped(system: RunningSystem, perSecond: number) {
  const placing: Promise<string>[] = [];
  let stopped = false;
  const started = Date.now();
  const loop = (async () => {
    for (let i = 0; !stopped; i++) {
      await sleep(Math.max(0, started + (i * 1000) / perSecond - Date.now()));
      if (!stopped) placing.push(placeWithRetries(system, SKUS[i % SKUS.length]!, randomUUID()));
    }
  })();
  return {
    placedSoFar: () => Promise.all([...placing]),
    async stop() {
      stopped = true;
      await loop;
      return Promise.all(placing);
    },
  };
}

interface Running {
  readonly system: RunningSystem;
  readonly proxies: { readonly smtp: FaultProxy; readonly stripe: FaultProxy };
  readonly logFile: string;
}

/** A system of its own, its notifications talking SMTP and its payments Stripe through fault proxies. */
async function withSystem<T>(
  kind: string,
  log: (line: string) => void,
  run: (running: Running) => Promise<T>,
): Promise<T> {
  const name = `${kind}_${Date.now().toString(36)}`;
  const logFile = join(tmpdir(), `idem-${name}.log`);
  const processLog = createWriteStream(logFile);
  log(`${kind}: process logs in ${logFile}`);
  const portOffset = randomInt(8_000, 20_000);
  const { urls } = describeSystem({ portOffset, name });
  const proxies = { smtp: await startFaultProxy(urls.smtp), stripe: await startFaultProxy(urls.stripe) };
  let system: RunningSystem | undefined;
  try {
    system = await startSystem({
      name,
      portOffset,
      replicas: 1,
      serviceEnv: {
        // A slow link doubles its delay each round trip: SMTP waits longer than QUICK_TAKEOVER_ENV's.
        notifications: { SMTP_URL: proxies.smtp.url, SMTP_TIMEOUT_MS: '1500' },
        payments: { STRIPE_API_BASE: proxies.stripe.url },
        // Requests through the proxy name its address: the simulator must answer to it.
        'stripe-sim': { ALLOWED_HOSTS: new URL(proxies.stripe.url).host },
      },
      env: { ...QUICK_TAKEOVER_ENV, ...UNLIMITED_ORDERS_ENV },
      log: (part, line) => processLog.write(`${part.padEnd(13)}| ${line}\n`),
    });
    return await run({ system, proxies, logFile });
  } finally {
    await system?.stop();
    await Promise.all([proxies.smtp.close(), proxies.stripe.close()]);
    if (system) await Promise.all(SERVICES.map((service) => dropDatabase(system!.databaseUrls[service])));
    processLog.end();
  }
}

/** A switch of the system's SMTP sink (`/_sink/…`). */
async function mailSink(system: RunningSystem, path: string, body: object): Promise<void> {
  const res = await fetch(`${system.urls.mail}/_sink/${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`the SMTP sink's ${path} answered ${res.status}`);
}

async function placeAtRate(system: RunningSystem, perSecond: number, seconds: number, cancelShare: number) {
  const count = Math.round(perSecond * seconds);
  const placing: Promise<string>[] = [];
  const cancelling: Promise<void>[] = [];
  const started = Date.now();
  for (let i = 0; i < count; i++) {
    await sleep(Math.max(0, started + (i * 1000) / perSecond - Date.now()));
    const placed = placeWithRetries(system, SKUS[i % SKUS.length]!, randomUUID());
    placing.push(placed);
    if (Math.random() < cancelShare)
      cancelling.push(placed.then((orderId) => cancelWithRetries(system, orderId, randomInt(0, 3_000))));
  }
  const orderIds = await Promise.all(placing);
  await Promise.all(cancelling);
  return { orderIds, cancels: cancelling.length };
}

async function statusesOf(system: RunningSystem, orderIds: readonly string[]): Promise<string[]> {
  const customer = await asCustomer(CUSTOMER);
  const statuses: string[] = [];
  for (let i = 0; i < orderIds.length; i += 50)
    statuses.push(
      ...(await Promise.all(
        orderIds
          .slice(i, i + 50)
          .map(
            async (id) => (await getJson<{ status: string }>(`${system.urls.orders}/orders/${id}`, customer)).status,
          ),
      )),
    );
  return statuses;
}

async function waitForFinal(system: RunningSystem, orderIds: readonly string[], deadline: number): Promise<string[]> {
  let statuses = await statusesOf(system, orderIds);
  while (!statuses.every((s) => FINAL.has(s)) && Date.now() < deadline) {
    await sleep(2000);
    statuses = await statusesOf(system, orderIds);
  }
  return statuses;
}

async function drainAndCheck(
  system: RunningSystem,
  orderIds: readonly string[],
  cancels: number,
  logFile: string,
  drainSeconds: number,
): Promise<ProviderFaultsReport> {
  const deadline = Date.now() + drainSeconds * 1000;
  const statuses = await waitForFinal(system, orderIds, deadline);
  const paid = orderIds.filter((_, i) => statuses[i] === 'PAID');
  const check = () => checkQuietSystem(system);
  const receiptsMissing = async () => {
    const receipts = await readOnly(system.databaseUrls.notifications, (q) =>
      q<{ order_id: string }>(`SELECT order_id::text FROM email_work_items WHERE kind = 'receipt' AND status = 'sent'`),
    );
    const withReceipt = new Set(receipts.map((r) => r.order_id));
    return paid.filter((id) => !withReceipt.has(id));
  };
  // Quiet: the checker finds nothing and every PAID order's receipt is out (a send that failed
  // while SMTP was away is retried after its delay).
  let checker = await check();
  let paidWithoutReceipt = await receiptsMissing();
  while ((!checker.ok || paidWithoutReceipt.length > 0) && Date.now() < deadline) {
    await sleep(2000);
    [checker, paidWithoutReceipt] = await Promise.all([check(), receiptsMissing()]);
  }
  const deadLetters = await Promise.all(
    SERVICES.map((service) =>
      readOnly(
        system.databaseUrls[service],
        async (q) => (await q<{ n: number }>(`SELECT count(*)::int AS n FROM dead_letters`))[0]!.n,
      ),
    ),
  );
  const endedByStatus: Record<string, number> = {};
  for (const status of statuses) endedByStatus[status] = (endedByStatus[status] ?? 0) + 1;
  const chargedAfterCancel = await chargesAfterCancel(system);
  const deadLettered = deadLetters.reduce((a, b) => a + b, 0);
  const emails = await emailCopies(system);
  return {
    ordersPlaced: orderIds.length,
    cancels,
    endedByStatus,
    chargedAfterCancel,
    paidWithoutReceipt,
    deadLetters: deadLettered,
    emails,
    checker,
    logFile,
    ok:
      checker.ok &&
      statuses.every((s) => FINAL.has(s)) &&
      chargedAfterCancel.length === 0 &&
      paidWithoutReceipt.length === 0 &&
      deadLettered === 0 &&
      emails.unexplained.length === 0,
  };
}

/**
 * Each Message-ID the mail server received more than once, against its work item: a copy is
 * explained only by an unconfirmed send that no lookup settled (one the server could not be asked
 * about). A lookup that found the message marked it sent, and one that found none preceded the
 * only copy: neither explains a second.
 */
async function emailCopies(system: RunningSystem): Promise<EmailCopies> {
  const received = new Map<string, number>();
  for (let start = 0; ; start += 500) {
    const res = await fetch(`${system.urls.mail}/api/v1/messages?start=${start}&limit=500`);
    if (!res.ok) throw new Error(`the mail server's messages answered ${res.status}`);
    const page = (await res.json()) as { messages: { MessageID: string }[]; total: number };
    for (const { MessageID } of page.messages) received.set(MessageID, (received.get(MessageID) ?? 0) + 1);
    if (page.messages.length === 0 || start + 500 >= page.total) break;
  }
  const items = await readOnly(system.databaseUrls.notifications, (q) =>
    q<{ message_id: string; unconfirmed_sends: number; reconciled_sends: number }>(
      `SELECT message_id, unconfirmed_sends, reconciled_sends FROM email_work_items`,
    ),
  );
  let copies = 0;
  const unexplained: string[] = [];
  for (const item of items) {
    const count = received.get(item.message_id.replace(/^<|>$/g, '')) ?? 0;
    copies += Math.max(0, count - 1);
    if (count > 1 + item.unconfirmed_sends - item.reconciled_sends)
      unexplained.push(
        `${item.message_id}: ${count} copies, ${item.unconfirmed_sends} unconfirmed sends, ${item.reconciled_sends} settled by a lookup`,
      );
  }
  const sum = (key: 'unconfirmed_sends' | 'reconciled_sends') => items.reduce((total, item) => total + item[key], 0);
  return {
    copies,
    unconfirmedSends: sum('unconfirmed_sends'),
    reconciledSends: sum('reconciled_sends'),
    unexplained,
  };
}

/**
 * PaymentIntents created after their order's cancellation was recorded in payments. A call
 * already under way when the cancel commits may still create one (it is then refunded): the
 * provider's clock counts seconds, so a creation within STRIPE_TIMEOUT_MS and a second of the
 * cancellation is that call, and anything later is a new call made after the cancel.
 */
async function chargesAfterCancel(system: RunningSystem): Promise<string[]> {
  const intents = await listStripe<{ id: string; created: number; metadata: Record<string, string> }>(
    { apiBase: system.urls.stripe, apiKey: SIMULATOR_API_KEY },
    '/v1/payment_intents',
  );
  const cancelled = await readOnly(system.databaseUrls.payments, (q) =>
    q<{ order_id: string; cancelled_at: Date }>(
      `SELECT order_id::text, cancelled_at FROM payment_orders WHERE cancelled_at IS NOT NULL`,
    ),
  );
  const cancelledAt = new Map(cancelled.map((row) => [row.order_id, row.cancelled_at.getTime()]));
  const underWayMs = Number(QUICK_TAKEOVER_ENV.STRIPE_TIMEOUT_MS) * 2 + 1000;
  return intents
    .filter((intent) => {
      const at = cancelledAt.get(intent.metadata.order_id ?? '');
      return at !== undefined && intent.created * 1000 > at + underWayMs;
    })
    .map((intent) => `${intent.metadata.order_id}: ${intent.id}`);
}

/** The pause's figure against its target (drained within as long as it lasted), as the bench prints one. */
export function formatPauseDrain({ pauseSeconds, owedEmails, drainedAfterSeconds, withinPause }: PauseDrain): string {
  const measured =
    drainedAfterSeconds === undefined
      ? `not drained (${owedEmails} emails owed)`
      : `${drainedAfterSeconds.toFixed(1)} s for ${owedEmails} emails owed at the restart`;
  return `${withinPause ? 'PASS' : 'MISS'}  a ${pauseSeconds} s notifications pause under load drained within ${pauseSeconds} s: ${measured}`;
}

export function formatProviderFaultsReport(report: ProviderFaultsReport & { readonly pause?: PauseDrain }): string {
  return [
    ...(report.pause ? [formatPauseDrain(report.pause)] : []),
    `orders placed            ${report.ordersPlaced}`,
    `cancels asked            ${report.cancels}`,
    `ended                    ${Object.entries(report.endedByStatus)
      .map(([s, n]) => `${s} ${n}`)
      .join(', ')}`,
    `charged after a cancel   ${report.chargedAfterCancel.length ? report.chargedAfterCancel.slice(0, 5).join(', ') : 'none'}`,
    `PAID without a receipt   ${report.paidWithoutReceipt.length ? report.paidWithoutReceipt.slice(0, 5).join(', ') : 'none'}`,
    `dead letters             ${report.deadLetters}`,
    `emails received twice    ${report.emails.copies} (unconfirmed sends ${report.emails.unconfirmedSends}, settled by a lookup ${report.emails.reconciledSends}${report.emails.unexplained.length ? `; unexplained: ${report.emails.unexplained.slice(0, 5).join(', ')}` : ''})`,
    `process logs             ${report.logFile}`,
    '',
    formatReport(report.checker),
    '',
    report.ok ? 'providers verdict: OK' : 'providers verdict: FAILED',
  ].join('\n');
}
