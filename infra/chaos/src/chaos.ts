import type { ChildProcess } from 'node:child_process';
import { randomInt, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatReport, runChecks, type Report } from '@idem/checker';
import { consumers, shop } from '@idem/shop';
import { dropDatabase } from '@idem/database';
import {
  asCustomer,
  getJson,
  QUICK_TAKEOVER_ENV,
  SERVICES,
  startSystem,
  UNLIMITED_ORDERS_ENV,
  type RunningSystem,
} from '@idem/native-run';
import { createPublisher } from '@idem/messaging';
import { SIMULATOR_API_KEY } from '@idem/stripe-sim';
import {
  createPostgresServer,
  postgresBinDir,
  startRedisCluster,
  waitFor,
  type PostgresServer,
  type RedisCluster,
} from '@idem/testkit';
import { startFaultProxy, type FaultProxy } from './fault-proxy.js';

/**
 * The chaos run: the whole system as processes — every consumer twice over (replicas), every
 * publication sent twice past BullMQ's dedupe — on a PostgreSQL server of its own; orders are
 * placed at a steady rate while, at random moments, service processes are SIGKILLed and
 * restarted, consumers are paused (SIGSTOP) longer than their lock so BullMQ hands their jobs to
 * the other instance while they resume and finish, PostgreSQL is restarted, and one service's
 * connections to Redis stall — or, on a Redis Cluster of its own, the master of a busy queue is
 * SIGKILLed and its replica promoted. Then, once quiet, the exactly-once checker. Bounded in count and
 * time, and it only talks to this machine.
 */

export interface ChaosOptions {
  readonly orders: number;
  readonly kills: number;
  /** How long orders are placed and processes killed; the drain comes after. */
  readonly seconds: number;
  /** How long to wait for every order to end after the chaos. @defaultValue 120 */
  readonly drainSeconds?: number;
  /** Instances of each service (the extras consume, relay and work). @defaultValue 2 */
  readonly replicas?: number;
  /** Consumers paused (SIGSTOP) longer than their lock, then resumed. @defaultValue 1 */
  readonly pauses?: number;
  /** PostgreSQL restarts (needs the server binaries; left out, and said, without them). @defaultValue 1 */
  readonly postgresRestarts?: number;
  /** Stalls of inventory's Redis connections (3 s each; not on a cluster). @defaultValue 1 */
  readonly redisStalls?: number;
  /**
   * Runs on a Redis Cluster of its own (three masters, a replica each, from the machine's
   * redis-server) instead of REDIS_URL. No proxy can stand before a cluster, so it has no stalls.
   */
  readonly redisCluster?: boolean;
  /** On a cluster: the master of a busy queue SIGKILLed, its replica promoted, the node restarted. @defaultValue 1 */
  readonly brokerKills?: number;
  /**
   * The share of orders their customer cancels, each at a random moment of its life (0–3 s after
   * it was placed: before, during or after its reservation and its payment): a cancelled order
   * must keep no money, whatever the cancel raced. @defaultValue 0.3
   */
  readonly cancelShare?: number;
  readonly log?: (line: string) => void;
}

export interface ChaosReport {
  readonly ordersPlaced: number;
  /** Cancels the customer asked for (an order already past cancelling answers 409 and counts too). */
  readonly cancels: number;
  readonly endedByStatus: Record<string, number>;
  readonly kills: { part: string; at: number }[];
  /** Every fault, in order: `kill orders@12s`, `pause inventory-2@20s`, `postgres restart@31s`, … */
  readonly faults: string[];
  readonly deliveries: number;
  /** Deliveries after a failed attempt (a redelivery after a crash keeps its attempt number). */
  readonly retries: number;
  readonly duplicatesSuppressed: number;
  readonly deadLetters: number;
  /** Processes that ended without a fault ending them (`payments-2 exited (1)`): each one fails the run. */
  readonly crashes: string[];
  readonly checker: Report;
  /**
   * The consumer queues that still hold jobs at the end, by state: a message the checker calls
   * lost that still waits here was never taken by a consumer, not gone from the broker.
   */
  readonly queues: Record<string, Record<string, number>>;
  /** Every process's output, one line each, prefixed by its part. */
  readonly logFile: string;
  readonly ok: boolean;
}

export const FINAL = new Set(['PAID', 'REJECTED', 'PAYMENT_FAILED', 'CANCELLED', 'REFUNDED']);
const LOCK_MS = Number(QUICK_TAKEOVER_ENV.CONSUMER_LOCK_MS);
type Fault = 'kill' | 'pause' | 'postgres' | 'stall' | 'broker';
const SKUS = ['keyboard', 'mouse', 'monitor', 'cable'];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const log = options.log ?? ((line: string) => console.log(line));
  const counts = { deliveries: 0, retries: 0, duplicates: 0, deadLetters: 0 };
  const name = `chaos_${Date.now().toString(36)}`;
  const logFile = join(tmpdir(), `idem-${name}.log`);
  const processLog = createWriteStream(logFile);
  log(`chaos: process logs in ${logFile}`);
  // A server of its own, so it can be restarted mid-flow without touching anyone else's.
  let postgres: PostgresServer | undefined;
  if ((options.postgresRestarts ?? 1) > 0 && postgresBinDir()) {
    postgres = await createPostgresServer({ port: randomInt(15_500, 16_400), settings: { max_connections: '300' } });
    await postgres.start();
  } else if ((options.postgresRestarts ?? 1) > 0) {
    log('chaos: no PostgreSQL server binaries here: the PostgreSQL restarts are left out');
  }
  const cluster = options.redisCluster ? await startRedisCluster({ firstPort: randomInt(30_000, 30_900) }) : undefined;
  const redisUrl = cluster?.url ?? process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  const proxy: FaultProxy | undefined = cluster ? undefined : await startFaultProxy(redisUrl);
  let system: RunningSystem | undefined;
  let exits: Exits | undefined;
  try {
    system = await startSystem({
      name,
      portOffset: randomInt(8_000, 20_000), // below the ephemeral port range
      replicas: options.replicas ?? 2,
      ...(postgres ? { postgresUrl: postgres.url } : {}),
      redisUrl,
      ...(proxy ? { serviceEnv: { inventory: { REDIS_URL: proxy.url } } } : {}),
      env: {
        IDEM_FAULTS_ENABLED: '1',
        IDEM_FAULTS: 'publish-twice',
        ...QUICK_TAKEOVER_ENV,
        ...UNLIMITED_ORDERS_ENV,
      },
      log: (part, line) => {
        processLog.write(`${part.padEnd(13)}| ${line}\n`);
        if (!line.includes(' delivery ')) return;
        counts.deliveries += 1;
        if (!/ attempt=1( |$)/.test(line)) counts.retries += 1;
        if (/outcome=(duplicate|conflicting_duplicate)/.test(line)) counts.duplicates += 1;
        if (line.includes('deadLettered=true')) counts.deadLetters += 1;
      },
    });
    const running = system;
    exits = watchExits(running);
    const plan: Fault[] = shuffle([
      ...Array<Fault>(options.kills).fill('kill'),
      ...Array<Fault>(options.pauses ?? 1).fill('pause'),
      ...Array<Fault>(postgres ? (options.postgresRestarts ?? 1) : 0).fill('postgres'),
      ...Array<Fault>(proxy ? (options.redisStalls ?? 1) : 0).fill('stall'),
      ...Array<Fault>(cluster ? (options.brokerKills ?? 1) : 0).fill('broker'),
    ]);
    log(`chaos: system ${name} up; ${options.orders} orders over ${options.seconds}s; faults: ${plan.join(', ')}`);
    const started = Date.now();
    const [{ orderIds, cancels }, faults] = await Promise.all([
      placeSteadily(running, options.orders, options.seconds * 1000, options.cancelShare ?? 0.3),
      injectFaults(running, plan, options.seconds * 1000, started, { postgres, proxy, cluster, exits }),
    ]);
    log(`chaos: ${orderIds.length} orders placed, ${faults.length} faults; waiting for every order to end`);

    const deadline = Date.now() + (options.drainSeconds ?? 120) * 1000;
    let statuses: string[] = [];
    const customer = await asCustomer(CUSTOMER);
    do {
      statuses = await Promise.all(
        orderIds.map(
          async (id) => (await getJson<{ status: string }>(`${running.urls.orders}/orders/${id}`, customer)).status,
        ),
      );
      if (statuses.every((s) => FINAL.has(s))) break;
      await sleep(1000);
    } while (Date.now() < deadline);
    // Quiet means the checker finds nothing stuck either: emails and late duplicates settle
    // after the orders do (a dispatcher killed mid-batch leaves a backlog to drain).
    const check = () => checkQuietSystem(running);
    let checker = await check();
    while (!checker.ok && Date.now() < deadline) {
      await sleep(2000);
      checker = await check();
    }
    const queues = await jobsLeftIn(redisUrl, running.queuePrefix);
    const endedByStatus: Record<string, number> = {};
    for (const status of statuses) endedByStatus[status] = (endedByStatus[status] ?? 0) + 1;
    return {
      ordersPlaced: orderIds.length,
      cancels,
      endedByStatus,
      kills: faults.filter((f) => f.kind === 'kill').map(({ part, at }) => ({ part, at })),
      faults: faults.map((f) => `${f.kind} ${f.part}@${f.at}s`),
      deliveries: counts.deliveries,
      retries: counts.retries,
      duplicatesSuppressed: counts.duplicates,
      deadLetters: counts.deadLetters,
      crashes: exits.crashes,
      checker,
      queues,
      logFile,
      ok:
        checker.ok &&
        exits.crashes.length === 0 &&
        orderIds.length === options.orders &&
        statuses.every((s) => FINAL.has(s)),
    };
  } catch (error) {
    const crashed = exits?.crashes.length ? `; crashed: ${exits.crashes.join(', ')}` : '';
    throw new Error(`${(error as Error).message}${crashed} (process logs in ${logFile})`, { cause: error });
  } finally {
    exits?.stopWatching();
    await system?.stop();
    await proxy?.close();
    await cluster?.stop();
    if (postgres) await postgres.destroy();
    else if (system) await Promise.all(SERVICES.map((service) => dropDatabase(system!.databaseUrls[service])));
    processLog.end();
  }
}

/**
 * Places `count` orders evenly over `windowMs`; each retries (same Idempotency-Key) while orders is
 * down. A `cancelShare` of them is cancelled 0–3 s after it was placed.
 */
async function placeSteadily(
  system: RunningSystem,
  count: number,
  windowMs: number,
  cancelShare: number,
): Promise<{ orderIds: string[]; cancels: number }> {
  const interval = windowMs / Math.max(1, count);
  const placing: Promise<string>[] = [];
  const cancelling: Promise<void>[] = [];
  for (let i = 0; i < count; i++) {
    const placed = placeWithRetries(system, SKUS[i % SKUS.length]!, randomUUID());
    placing.push(placed);
    if (Math.random() < cancelShare) {
      cancelling.push(placed.then(async (orderId) => cancelWithRetries(system, orderId, randomInt(0, 3_000))));
    }
    await sleep(interval);
  }
  const orderIds = await Promise.all(placing);
  await Promise.all(cancelling);
  return { orderIds, cancels: cancelling.length };
}

/** The customer cancels after `afterMs`; an order past cancelling (409) is an answer too. */
export async function cancelWithRetries(system: RunningSystem, orderId: string, afterMs: number): Promise<void> {
  await sleep(afterMs);
  const deadline = Date.now() + 60_000;
  let last = 'no answer';
  for (;;) {
    try {
      const res = await fetch(`${system.urls.orders}/orders/${orderId}/cancel`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(await asCustomer(CUSTOMER)) },
        body: JSON.stringify({ reason: 'chaos: the customer changed their mind' }),
      });
      if (res.status === 200 || res.status === 409) return;
      last = `${res.status} ${(await res.text()).slice(0, 300)}`;
    } catch (error) {
      last = `no answer (${(error as Error).message})`; // orders is being restarted
    }
    if (Date.now() > deadline) throw new Error(`could not cancel order ${orderId} within 60 s; last: ${last}`);
    await sleep(250);
  }
}

/** The checker on a system of these runs, once it is quiet: counted lost after 5 s, stuck after 10 s. */
export const checkQuietSystem = (system: RunningSystem) =>
  runChecks({
    databaseUrls: system.databaseUrls,
    stripe: { apiBase: system.urls.stripe, apiKey: SIMULATOR_API_KEY },
    mailApi: system.urls.mail,
    quietWindowMs: 5000,
    stuckAfterMs: 10_000,
  });

/** Who places the chaos run's orders. */
export const CUSTOMER = 'chaos';

export async function placeWithRetries(system: RunningSystem, sku: string, key: string): Promise<string> {
  const deadline = Date.now() + 60_000;
  let last = 'no answer';
  for (;;) {
    try {
      const res = await fetch(`${system.urls.orders}/orders`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key, ...(await asCustomer(CUSTOMER)) },
        body: JSON.stringify({ lines: [{ sku, quantity: 1 }] }),
      });
      if (res.status === 201) return ((await res.json()) as { orderId: string }).orderId;
      last = `${res.status} ${(await res.text()).slice(0, 300)}`;
    } catch (error) {
      last = `no answer (${(error as Error).message})`; // orders is being restarted
    }
    if (Date.now() > deadline) throw new Error(`could not place an order within 60 s (key ${key}); last: ${last}`);
    await sleep(250);
  }
}

/** Spreads the planned faults across the window; each one is over (restarted, resumed) before the next. */
async function injectFaults(
  system: RunningSystem,
  plan: readonly Fault[],
  windowMs: number,
  started: number,
  {
    postgres,
    proxy,
    cluster,
    exits,
  }: { postgres: PostgresServer | undefined; proxy?: FaultProxy; cluster?: RedisCluster; exits: Exits },
): Promise<{ kind: Fault; part: string; at: number }[]> {
  const done: { kind: Fault; part: string; at: number }[] = [];
  const at = () => Math.round((Date.now() - started) / 1000);
  for (const [i, kind] of plan.entries()) {
    await sleep(Math.max(0, started + ((i + 0.5) * windowMs) / plan.length - Date.now()));
    if (kind === 'kill') {
      const part = SERVICES[randomInt(SERVICES.length)]!;
      const child = system.processes.get(part)!;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      exits.expect(child);
      child.kill('SIGKILL');
      await exited;
      done.push({ kind, part, at: at() });
      await sleep(randomInt(200, 1500));
      await system.restart(part);
      exits.watch(part);
    } else if (kind === 'pause') {
      // Longer than its lock: its jobs are stalled and handed to the other instance, while it
      // resumes and finishes them too. Both settle; the inbox keeps one effect.
      const parts = [...system.processes.keys()].filter((p) => new RegExp(`^(${SERVICES.join('|')})(-\\d+)?$`).test(p));
      const part = parts[randomInt(parts.length)]!;
      const child = system.processes.get(part)!;
      child.kill('SIGSTOP');
      done.push({ kind, part, at: at() });
      await sleep(LOCK_MS + 2_000);
      child.kill('SIGCONT');
    } else if (kind === 'postgres') {
      done.push({ kind, part: 'postgres', at: at() });
      await postgres!.stop('fast');
      await sleep(1_000);
      await postgres!.start();
    } else if (kind === 'stall') {
      done.push({ kind, part: 'inventory↔redis', at: at() });
      await proxy!.stall(3_000);
    } else {
      done.push({ kind, part: `redis ${await killBusyMaster(system, cluster!)}`, at: at() });
    }
  }
  return done;
}

/**
 * SIGKILLs the master holding inventory.order-placed's queue (every order passes through it),
 * waits for the cluster to promote its replica, and starts the node again, as an orchestrator
 * would: it rejoins as the new master's replica. Returns the port it killed.
 */
async function killBusyMaster(system: RunningSystem, cluster: RedisCluster): Promise<number> {
  const busy = `${system.queuePrefix}:{inventory.order-placed.v1}:id`;
  const { master } = await cluster.roleOf(busy);
  await cluster.kill(master);
  const promoted = async () => {
    const now = await cluster.roleOf(busy).catch(() => undefined);
    return now !== undefined && now.master !== master;
  };
  await waitFor(promoted, { timeoutMs: 30_000, what: `a replica promoted in place of ${master.port}` });
  await cluster.restart(master);
  return master.port;
}

interface Exits {
  /** Every exit no fault caused, as `part exited (signal or code)`. */
  readonly crashes: string[];
  watch(part: string): void;
  expect(child: ChildProcess): void;
  stopWatching(): void;
}

/** Watches every process for an exit nobody asked for: a crash the guarantee survived is still a bug. */
function watchExits(system: RunningSystem): Exits {
  const crashes: string[] = [];
  const expected = new WeakSet<ChildProcess>();
  let watching = true;
  const watch = (part: string) => {
    const child = system.processes.get(part)!;
    child.once('exit', (code, signal) => {
      if (watching && !expected.has(child)) crashes.push(`${part} exited (${signal ?? code})`);
    });
  };
  for (const part of system.processes.keys()) watch(part);
  return {
    crashes,
    watch,
    expect: (child) => expected.add(child),
    stopWatching: () => (watching = false),
  };
}

function shuffle<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = randomInt(i + 1);
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

/** The consumer queues holding any job, with their counts by state. */
async function jobsLeftIn(redisUrl: string, prefix: string): Promise<Record<string, Record<string, number>>> {
  const publisher = createPublisher({ catalogue: shop, redisUrl, prefix });
  try {
    const counts = await Promise.all(
      Object.keys(consumers).map(async (consumer) => [consumer, await publisher.jobCounts(consumer)] as const),
    );
    return Object.fromEntries(counts.filter(([, byState]) => Object.values(byState).some((n) => n > 0)));
  } finally {
    await publisher.close();
  }
}

export function formatChaosReport(report: ChaosReport): string {
  return [
    `orders placed          ${report.ordersPlaced}`,
    `cancels asked          ${report.cancels}`,
    `ended                  ${Object.entries(report.endedByStatus)
      .map(([s, n]) => `${s} ${n}`)
      .join(', ')}`,
    `processes SIGKILLed    ${report.kills.length}`,
    `faults                 ${report.faults.join(', ')}`,
    `deliveries             ${report.deliveries}`,
    `retried deliveries     ${report.retries}`,
    `duplicates suppressed  ${report.duplicatesSuppressed}`,
    `dead letters           ${report.deadLetters}`,
    `crashes                ${report.crashes.length ? report.crashes.join(', ') : 'none'}`,
    `process logs           ${report.logFile}`,
    `jobs left in queues    ${
      Object.entries(report.queues)
        .map(
          ([consumer, byState]) =>
            `${consumer}: ${Object.entries(byState)
              .map(([state, n]) => `${state} ${n}`)
              .join(', ')}`,
        )
        .join('; ') || 'none'
    }`,
    '',
    formatReport(report.checker),
    '',
    report.ok ? 'chaos verdict: OK' : 'chaos verdict: FAILED',
  ].join('\n');
}
