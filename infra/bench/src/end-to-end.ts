import { randomUUID } from 'node:crypto';
import { dropDatabase } from '@idem/database';
import {
  deployServices,
  placeOrder,
  SERVICES,
  startSystem,
  UNLIMITED_ORDERS_ENV,
  type RunningSystem,
  type SystemOptions,
} from '@idem/native-run';
import { cpus } from 'node:os';
import pg from 'pg';
import { hopLatencies, type HopLatencies } from './hops.js';
import { cpuOfProcess, cpuSnapshot, rssOfProcess } from './cpu.js';
import { atRate, percentile, sleep } from './stats.js';

/**
 * Section 3: the whole system under a stepped, open-loop load. Orders are offered at a fixed
 * rate whatever the system answers (a closed loop would slow down with the system and hide
 * the saturation); each step's latencies run from the client sending `POST /orders` to the
 * order's PAID row (orders database) and to the receipt accepted by SMTP (the email work
 * item's sent_at, notifications database). Stepping stops after the first step the system
 * could not keep up with.
 */
export interface LoadStep {
  /** Orders per second offered. */
  readonly offered: number;
  readonly seconds: number;
  readonly placed: number;
  /** Orders PAID within the step and its drain time. */
  readonly paid: number;
  /** Receipts accepted by SMTP within the step and its drain time. */
  readonly receipts: number;
  /** PAID orders per second, from the first PAID to the last. */
  readonly achieved: number;
  readonly paidMs: Percentiles;
  readonly receiptMs: Percentiles;
  /** True when the system kept up: nearly everything paid, and no growing backlog. */
  readonly keptUp: boolean;
  /** CPU ms per placed order, by process (services, simulators, PostgreSQL, Redis, the load generator). */
  readonly cpuMsPerOrder: Record<string, number>;
  /** CPU used during the step (offer and drain) as a share of all cores. */
  readonly cpuUtilisation: number;
  /** Where the latency went, hop by hop (hops.ts). */
  readonly hops?: HopLatencies;
  /** Resident memory of each process of the system, MB, as the last order of the step was placed. */
  readonly rssMb?: Record<string, number>;
}

export interface Percentiles {
  readonly p50: number;
  readonly p95: number;
  readonly p99: number;
}

export interface EndToEndOptions {
  readonly loads: readonly number[];
  readonly stepSeconds: number;
  /** How long to wait after a step for its last orders. */
  readonly drainSeconds: number;
  /** Added to every default port (so a running `pnpm start` is left alone). */
  readonly portOffset: number;
  readonly log: (line: string) => void;
}

export interface EndToEndResult {
  /** The services ran as their images run them (deployed.ts in the native run), not from their sources through tsx. */
  readonly deployed?: boolean;
  readonly steps: LoadStep[];
  /** The highest offered load before latency leaves the flat part (p95 within 2× the lightest step's), if any. */
  readonly knee?: number;
  /** What each process costs when there is (almost) no work: see {@link IdleCpu}. */
  readonly idle?: IdleCpu;
}

/**
 * CPU of each process as a share of one core (1 = a whole core), measured after the warm-up over
 * {@link IDLE_SECONDS}: with the system at rest, and at 1 order a second. A loop that runs whether
 * or not there is work shows here, not in a cost per order under load.
 */
export interface IdleCpu {
  readonly seconds: number;
  readonly atRest: Record<string, number>;
  readonly atOnePerSecond: Record<string, number>;
}

const IDLE_SECONDS = 20;

const SKU = 'bench-item';

/** The whole system, natively, with stock for every order the load will place. */
export async function startLoadedSystem(
  options: Pick<EndToEndOptions, 'portOffset' | 'log'>,
  extra: Pick<SystemOptions, 'nodeOptions' | 'env' | 'redisUrl' | 'deployed'> = {},
): Promise<RunningSystem> {
  const system = await startSystem({
    name: `bench_${Date.now().toString(36)}`,
    portOffset: options.portOffset,
    ...extra,
    env: { ...UNLIMITED_ORDERS_ENV, ...extra.env },
    log: (part, line) => {
      if (/^(error|fatal)\b/.test(line)) options.log(`${part}: ${line}`);
    },
  });
  // The bench's SKU: priced in the catalog (orders) and stocked without limit (inventory).
  const put = (service: 'orders' | 'inventory', path: string, body: unknown) =>
    fetch(`${system.urls[service]}${path}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${system.adminTokens[service]}` },
      body: JSON.stringify(body),
    });
  for (const res of [
    await put('orders', `/catalog/${SKU}`, { name: 'Bench item', unitPriceCents: 500, currency: 'eur' }),
    await put('inventory', `/stock/${SKU}`, { available: 1_000_000_000 }),
  ]) {
    if (res.ok) continue;
    const answer = `PUT ${new URL(res.url).pathname} answered ${res.status}: ${await res.text()}`;
    await stopLoadedSystem(system);
    throw new Error(answer);
  }
  return system;
}

export async function stopLoadedSystem(system: RunningSystem): Promise<void> {
  await system.stop();
  await Promise.all(SERVICES.map((service) => dropDatabase(system.databaseUrls[service])));
}

const WARM_UP_SECONDS = 10;

export async function runEndToEnd(options: EndToEndOptions): Promise<EndToEndResult> {
  // What is measured is what the images run: each service built, deployed and started with its
  // image's command and NODE_ENV. From the sources, tsx's loader adds 8–45 MB to each process and
  // source-maps each stack trace a library takes (the Stripe SDK takes one per request).
  const started = Date.now();
  const deploys = await deployServices(SERVICES);
  options.log(`deployed the services as their images hold them (${Math.round((Date.now() - started) / 1000)} s)`);
  try {
    const system = await startLoadedSystem(options, { deployed: deploys.dirs });
    try {
      // Warm, as a running system is: the lightest load for WARM_UP_SECONDS, not recorded. A cold
      // first step charges V8's compilation and PostgreSQL's first plans to its orders, and its
      // inflated p95 would loosen the knee's rule.
      await runStep(system, options.loads[0]!, { ...options, stepSeconds: WARM_UP_SECONDS });
      options.log(`warmed up: ${WARM_UP_SECONDS} s at ${options.loads[0]} orders/s, not recorded`);
      const idle = await idleCpu(system, options);
      const steps: LoadStep[] = [];
      for (const offered of options.loads) {
        const step = await runStep(system, offered, options);
        steps.push(step);
        options.log(
          `${offered} orders/s offered: ${step.achieved} PAID/s, ${step.paid}/${step.placed} paid, ` +
            `POST→PAID p50 ${step.paidMs.p50} ms p95 ${step.paidMs.p95} ms p99 ${step.paidMs.p99} ms, ` +
            `→receipt p95 ${step.receiptMs.p95} ms${step.keptUp ? '' : ' (saturated)'}`,
        );
        if (!step.keptUp) break;
      }
      return { deployed: true, steps, knee: kneeOf(steps), idle };
    } finally {
      await stopLoadedSystem(system);
    }
  } finally {
    deploys.remove();
  }
}

/** One step: `offered` orders per second for `stepSeconds`, then up to `drainSeconds` for the last ones. */
export async function runStep(
  system: RunningSystem,
  offered: number,
  options: Pick<EndToEndOptions, 'stepSeconds' | 'drainSeconds' | 'log'>,
): Promise<LoadStep> {
  const count = Math.max(1, Math.round(offered * options.stepSeconds));
  const sent = new Map<string, number>();
  const cpuBefore = cpuByPart(system);
  const started = Date.now();
  await atRate(count, offered, () => {
    const at = Date.now();
    return placeOrder(system.urls, [{ sku: SKU, quantity: 1 }], 'pm_card_visa', randomUUID()).then(
      (order) => void sent.set(order.orderId, at),
      (error: unknown) => options.log(`POST /orders failed: ${(error as Error).message}`),
    );
  });
  const rssMb = Object.fromEntries(
    [...system.processes].flatMap(([name, child]) => {
      const mb = rssOfProcess(child.pid!);
      return mb === undefined ? [] : [[name, mb]];
    }),
  );

  const orders = new pg.Pool({ connectionString: system.databaseUrls.orders, max: 1 });
  const notifications = new pg.Pool({ connectionString: system.databaseUrls.notifications, max: 1 });
  try {
    const ids = [...sent.keys()];
    const paidAt = () =>
      timesOf(
        orders,
        `SELECT order_id::text AS id, occurred_at AS at FROM order_status_changes WHERE status = 'PAID' AND order_id = ANY($1::uuid[])`,
        ids,
      );
    const receiptAt = () =>
      timesOf(
        notifications,
        `SELECT order_id::text AS id, sent_at AS at FROM email_work_items
          WHERE kind = 'receipt' AND status = 'sent' AND order_id = ANY($1::uuid[])`,
        ids,
      );
    const deadline = Date.now() + options.drainSeconds * 1000;
    let paid = await paidAt();
    let receipts = await receiptAt();
    while ((paid.size < ids.length || receipts.size < ids.length) && Date.now() < deadline) {
      await sleep(500);
      [paid, receipts] = await Promise.all([paidAt(), receiptAt()]);
    }
    const cpuAfter = cpuByPart(system);
    const hops = await hopLatencies(system, sent);
    const cpuMsPerOrder = Object.fromEntries(
      Object.keys(cpuAfter).map((part) => [
        part,
        Math.round(((cpuAfter[part]! - (cpuBefore[part] ?? 0)) / count) * 100) / 100,
      ]),
    );
    const cpuMs = Object.values(cpuMsPerOrder).reduce((sum, ms) => sum + ms, 0) * count;
    const latencies = (done: Map<string, number>) => [...done].map(([id, at]) => at - sent.get(id)!);
    // Completions per second while they happened: at a sustainable load the PAID times are the
    // send times shifted by the latency, so they span the step; past it they spread out.
    const times = [...paid.values()];
    const span = (Math.max(...times) - Math.min(...times)) / 1000;
    const achieved = paid.size > 1 ? (paid.size - 1) / span : 0;
    return {
      offered,
      seconds: options.stepSeconds,
      placed: ids.length,
      paid: paid.size,
      receipts: receipts.size,
      achieved: Math.round(achieved * 10) / 10,
      paidMs: percentiles(latencies(paid)),
      receiptMs: percentiles(latencies(receipts)),
      // Kept up: (almost) every order paid and its receipt sent before the drain ended, at
      // (almost) the offered rate. Otherwise the next step would start on this one's backlog.
      keptUp: paid.size >= 0.99 * count && receipts.size >= 0.99 * count && achieved >= 0.9 * offered,
      cpuMsPerOrder,
      rssMb,
      cpuUtilisation: Math.round((cpuMs / ((Date.now() - started) * cpus().length)) * 100) / 100,
      hops,
    };
  } finally {
    await Promise.all([orders.end(), notifications.end()]);
  }
}

/** {@link IdleCpu}: after the warm-up's last orders have drained, at rest and then at 1 order a second. */
async function idleCpu(system: RunningSystem, options: Pick<EndToEndOptions, 'log'>): Promise<IdleCpu> {
  await sleep(5_000); // the warm-up's last receipts
  const share = async (work: () => Promise<unknown>) => {
    const before = cpuByPart(system);
    const started = Date.now();
    await work();
    const after = cpuByPart(system);
    const ms = Date.now() - started;
    return Object.fromEntries(
      Object.keys(after).map((part) => [part, Math.round(((after[part]! - (before[part] ?? 0)) / ms) * 1000) / 1000]),
    );
  };
  const atRest = await share(() => sleep(IDLE_SECONDS * 1000));
  const atOnePerSecond = await share(() =>
    atRate(IDLE_SECONDS, 1, () =>
      placeOrder(system.urls, [{ sku: SKU, quantity: 1 }], 'pm_card_visa', randomUUID()).catch((error: unknown) =>
        options.log(`POST /orders failed: ${(error as Error).message}`),
      ),
    ),
  );
  const busiest = (shares: Record<string, number>) =>
    Object.entries(shares)
      .sort(([, a], [, b]) => b - a)
      .slice(0, 3)
      .map(([part, core]) => `${part} ${(core * 100).toFixed(1)}%`)
      .join(', ');
  options.log(`idle: at rest ${busiest(atRest)}; at 1 order/s ${busiest(atOnePerSecond)} of a core (the busiest)`);
  return { seconds: IDLE_SECONDS, atRest, atOnePerSecond };
}

/** CPU ms so far of each part of the system, PostgreSQL, Redis and this process. */
function cpuByPart(system: RunningSystem): Record<string, number> {
  const { bench, postgres, redis } = cpuSnapshot();
  const parts = Object.fromEntries([...system.processes].map(([name, child]) => [name, cpuOfProcess(child.pid!)]));
  return { ...parts, postgres, redis, 'load generator': bench };
}

async function timesOf(pool: pg.Pool, sql: string, ids: string[]): Promise<Map<string, number>> {
  const { rows } = await pool.query<{ id: string; at: Date }>(sql, [ids]);
  return new Map(rows.map((row) => [row.id, row.at.getTime()]));
}

function percentiles(values: number[]): Percentiles {
  return { p50: percentile(values, 50), p95: percentile(values, 95), p99: percentile(values, 99) };
}

/** The last step that kept up with p95 within twice the lightest step's p95. */
export function kneeOf(steps: readonly LoadStep[]): number | undefined {
  const flat = steps[0]?.paidMs.p95;
  if (flat === undefined) return undefined;
  let knee: number | undefined;
  for (const step of steps) {
    if (!step.keptUp || step.paidMs.p95 > 2 * flat) break;
    knee = step.offered;
  }
  return knee;
}
