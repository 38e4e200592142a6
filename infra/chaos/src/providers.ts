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
 * mail server is slow (each message accepted `smtpSlowMs` after it was sent) and then unreachable,
 * and the payment provider is unreachable while a share of the orders is cancelled. What must
 * hold when it is quiet again: no email received twice that an unconfirmed send (a reply lost as
 * the connections were cut) does not explain, no PaymentIntent created after its order's
 * cancellation, every PAID order's receipt sent, every cancelled order's money back, nothing dead-
 * lettered, the checker clean. Bounded in count and time; it only talks to this machine.
 */
export interface ProviderFaultsOptions {
  readonly ordersPerSecond: number;
  readonly seconds: number;
  /** How long the SMTP server takes to accept each message, from the start. */
  readonly smtpSlowMs: number;
  /** When the SMTP server becomes unreachable, and for how long (seconds). */
  readonly smtpDown: { readonly at: number; readonly for: number };
  /** When the payment provider becomes unreachable, and for how long (seconds). */
  readonly stripeDown: { readonly at: number; readonly for: number };
  /** @defaultValue 0.33 */
  readonly cancelShare?: number;
  /** How long to wait for everything to end after the orders. @defaultValue 300 */
  readonly drainSeconds?: number;
  readonly log?: (line: string) => void;
}

export interface ProviderFaultsReport {
  readonly ordersPlaced: number;
  readonly cancels: number;
  readonly endedByStatus: Record<string, number>;
  /** PaymentIntents the provider created after their order's cancellation was recorded in payments (beyond a call already under way). */
  readonly chargedAfterCancel: string[];
  /** PAID orders with no receipt received by the mail server. */
  readonly paidWithoutReceipt: string[];
  readonly deadLetters: number;
  readonly checker: Report;
  readonly logFile: string;
  readonly ok: boolean;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const SKUS = ['keyboard', 'mouse', 'monitor', 'cable'];

export async function runProviderFaults(options: ProviderFaultsOptions): Promise<ProviderFaultsReport> {
  const log = options.log ?? ((line: string) => console.log(line));
  return withSystem('providers', log, async ({ system, proxies, logFile }) => {
    await mailSink(system, 'slow-answers', { ms: options.smtpSlowMs });
    const started = Date.now();
    const at = (seconds: number) => sleep(Math.max(0, started + seconds * 1000 - Date.now()));
    const outages = Promise.all([
      at(options.smtpDown.at)
        .then(() => log('providers: SMTP unreachable'))
        .then(() => proxies.smtp.down(options.smtpDown.for * 1000)),
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
    const notifications = [...system.processes.keys()].filter((part) => part.startsWith('notifications'));
    await Promise.all(
      notifications.map(async (part) => {
        const child = system.processes.get(part)!;
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }),
    );
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
        notifications: { SMTP_URL: proxies.smtp.url },
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
  return {
    ordersPlaced: orderIds.length,
    cancels,
    endedByStatus,
    chargedAfterCancel,
    paidWithoutReceipt,
    deadLetters: deadLettered,
    checker,
    logFile,
    ok:
      checker.ok &&
      statuses.every((s) => FINAL.has(s)) &&
      chargedAfterCancel.length === 0 &&
      paidWithoutReceipt.length === 0 &&
      deadLettered === 0,
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

export function formatProviderFaultsReport(report: ProviderFaultsReport): string {
  return [
    `orders placed            ${report.ordersPlaced}`,
    `cancels asked            ${report.cancels}`,
    `ended                    ${Object.entries(report.endedByStatus)
      .map(([s, n]) => `${s} ${n}`)
      .join(', ')}`,
    `charged after a cancel   ${report.chargedAfterCancel.length ? report.chargedAfterCancel.slice(0, 5).join(', ') : 'none'}`,
    `PAID without a receipt   ${report.paidWithoutReceipt.length ? report.paidWithoutReceipt.slice(0, 5).join(', ') : 'none'}`,
    `dead letters             ${report.deadLetters}`,
    `process logs             ${report.logFile}`,
    '',
    formatReport(report.checker),
    '',
    report.ok ? 'providers verdict: OK' : 'providers verdict: FAILED',
  ].join('\n');
}
