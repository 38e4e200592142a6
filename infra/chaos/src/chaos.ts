import { randomInt, randomUUID } from 'node:crypto';
import { formatReport, runChecks, type Report } from '@idem/checker';
import { dropDatabase } from '@idem/database';
import { getJson, SERVICES, startSystem, type RunningSystem } from '@idem/native-run';
import { SIMULATOR_API_KEY } from '@idem/stripe-sim';

/**
 * The chaos run: the whole system as processes, every publication sent twice past BullMQ's
 * dedupe, orders placed at a steady rate while service processes are SIGKILLed and restarted
 * at random; then, once quiet, the exactly-once checker. Bounded in count and time, and it
 * only talks to this machine.
 */

export interface ChaosOptions {
  readonly orders: number;
  readonly kills: number;
  /** How long orders are placed and processes killed; settling comes after. */
  readonly seconds: number;
  /** How long to wait for every order to end after the chaos. @defaultValue 120 */
  readonly settleSeconds?: number;
  readonly log?: (line: string) => void;
}

export interface ChaosReport {
  readonly ordersPlaced: number;
  readonly endedByStatus: Record<string, number>;
  readonly kills: { part: string; at: number }[];
  readonly deliveries: number;
  /** Deliveries after a failed attempt (a redelivery after a crash keeps its attempt number). */
  readonly retries: number;
  readonly duplicatesSuppressed: number;
  readonly deadLetters: number;
  readonly checker: Report;
  readonly ok: boolean;
}

const FINAL = new Set(['PAID', 'REJECTED', 'PAYMENT_FAILED']);
const SKUS = ['keyboard', 'mouse', 'monitor', 'cable'];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const log = options.log ?? ((line: string) => console.log(line));
  const counts = { deliveries: 0, retries: 0, duplicates: 0, deadLetters: 0 };
  const name = `chaos_${Date.now().toString(36)}`;
  const system = await startSystem({
    name,
    portOffset: randomInt(8_000, 20_000), // below the ephemeral port range
    env: {
      IDEM_FAULTS_ENABLED: '1',
      IDEM_FAULTS: 'publish-twice',
      CONSUMER_LOCK_MS: '5000',
      CONSUMER_STALLED_INTERVAL_MS: '1000',
      PAYMENT_WORKER_LEASE_MS: '3000',
      STRIPE_TIMEOUT_MS: '1000',
      DISPATCHER_LEASE_MS: '6000',
      SMTP_TIMEOUT_MS: '400',
    },
    log: (_part, line) => {
      if (!line.includes(' delivery ')) return;
      counts.deliveries += 1;
      if (!/ attempt=1( |$)/.test(line)) counts.retries += 1;
      if (/outcome=(duplicate|conflicting_duplicate)/.test(line)) counts.duplicates += 1;
      if (line.includes('deadLettered=true')) counts.deadLetters += 1;
    },
  });
  log(`chaos: system ${name} up; ${options.orders} orders and ${options.kills} kills over ${options.seconds}s`);
  try {
    const started = Date.now();
    const [orderIds, kills] = await Promise.all([
      placeSteadily(system, options.orders, options.seconds * 1000),
      killAtRandom(system, options.kills, options.seconds * 1000, started),
    ]);
    log(`chaos: ${orderIds.length} orders placed, ${kills.length} kills; waiting for every order to end`);

    const deadline = Date.now() + (options.settleSeconds ?? 120) * 1000;
    let statuses: string[] = [];
    do {
      statuses = await Promise.all(
        orderIds.map(async (id) => (await getJson<{ status: string }>(`${system.urls.orders}/orders/${id}`)).status),
      );
      if (statuses.every((s) => FINAL.has(s))) break;
      await sleep(1000);
    } while (Date.now() < deadline);
    // Quiet means the checker finds nothing stuck either: emails and late duplicates settle
    // after the orders do (a dispatcher killed mid-batch leaves a backlog to drain).
    const check = () =>
      runChecks({
        databaseUrls: system.databaseUrls,
        stripe: { apiBase: system.urls.stripe, apiKey: SIMULATOR_API_KEY },
        mailApi: system.urls.mail,
        settleWindowMs: 5000,
        stuckAfterMs: 10_000,
      });
    let checker = await check();
    while (!checker.ok && Date.now() < deadline) {
      await sleep(2000);
      checker = await check();
    }
    const endedByStatus: Record<string, number> = {};
    for (const status of statuses) endedByStatus[status] = (endedByStatus[status] ?? 0) + 1;
    return {
      ordersPlaced: orderIds.length,
      endedByStatus,
      kills,
      deliveries: counts.deliveries,
      retries: counts.retries,
      duplicatesSuppressed: counts.duplicates,
      deadLetters: counts.deadLetters,
      checker,
      ok: checker.ok && orderIds.length === options.orders && statuses.every((s) => FINAL.has(s)),
    };
  } finally {
    await system.stop();
    await Promise.all(SERVICES.map((service) => dropDatabase(system.databaseUrls[service])));
  }
}

/** Places `count` orders evenly over `windowMs`; each retries (same Idempotency-Key) while orders is down. */
async function placeSteadily(system: RunningSystem, count: number, windowMs: number): Promise<string[]> {
  const interval = windowMs / Math.max(1, count);
  const placing: Promise<string>[] = [];
  for (let i = 0; i < count; i++) {
    placing.push(placeWithRetries(system, SKUS[i % SKUS.length]!, randomUUID()));
    await sleep(interval);
  }
  return Promise.all(placing);
}

async function placeWithRetries(system: RunningSystem, sku: string, key: string): Promise<string> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      const res = await fetch(`${system.urls.orders}/orders`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key },
        body: JSON.stringify({
          customerEmail: 'chaos@example.com',
          currency: 'eur',
          lines: [{ sku, quantity: 1, unitPriceCents: 500 }],
        }),
      });
      if (res.status === 201) return ((await res.json()) as { orderId: string }).orderId;
    } catch {
      // orders is being restarted
    }
    if (Date.now() > deadline) throw new Error(`could not place an order within 60 s (key ${key})`);
    await sleep(250);
  }
}

/** SIGKILLs a random service process `count` times across the window and restarts it. */
async function killAtRandom(
  system: RunningSystem,
  count: number,
  windowMs: number,
  started: number,
): Promise<{ part: string; at: number }[]> {
  const kills: { part: string; at: number }[] = [];
  for (let i = 0; i < count; i++) {
    await sleep(Math.max(0, started + ((i + 0.5) * windowMs) / count - Date.now()));
    const part = SERVICES[randomInt(SERVICES.length)]!;
    const child = system.processes.get(part)!;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    kills.push({ part, at: Math.round((Date.now() - started) / 1000) });
    await sleep(randomInt(200, 1500));
    await system.restart(part);
  }
  return kills;
}

export function formatChaosReport(report: ChaosReport): string {
  return [
    `orders placed          ${report.ordersPlaced}`,
    `ended                  ${Object.entries(report.endedByStatus)
      .map(([s, n]) => `${s} ${n}`)
      .join(', ')}`,
    `processes SIGKILLed    ${report.kills.length} (${report.kills.map((k) => `${k.part}@${k.at}s`).join(' ')})`,
    `deliveries             ${report.deliveries}`,
    `retried deliveries     ${report.retries}`,
    `duplicates suppressed  ${report.duplicatesSuppressed}`,
    `dead letters           ${report.deadLetters}`,
    '',
    formatReport(report.checker),
    '',
    report.ok ? 'chaos verdict: OK' : 'chaos verdict: FAILED',
  ].join('\n');
}
