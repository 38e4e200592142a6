import { randomInt } from 'node:crypto';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { subscribersOf } from '@idem/shop';
import { exited, startRedisCluster, waitFor, type RedisCluster } from '@idem/testkit';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { cpuOfProcess } from './cpu.js';
import { runStep, startLoadedSystem, stopLoadedSystem, type EndToEndOptions } from './end-to-end.js';
import { relayRowsPerSecond } from './relay.js';
import { atRate, countdown, median } from './stats.js';
import { transportDeliveries, type TransportDelivery } from './transports.js';

/**
 * Section 6: the broker. What an order costs Redis on one node and on a Redis Cluster of three
 * masters with a replica each — each redis-server's CPU per order, from /proc, while the system
 * takes section 3's kind of load — and what the relay's durability levels cost: the relay as the
 * services run it, on the cluster, publishing with `none` and with `replica` (a WAIT per master
 * written) — and, first, what one delivery costs through BullMQ alone ({@link BareDelivery}). Every
 * Redis here is the bench's own, from the machine's redis-server.
 */
export interface BrokerNode {
  readonly port: number;
  readonly role: 'master' | 'replica';
  readonly cpuMsPerOrder: number;
}

export interface BrokerLoad {
  readonly redis: 'one node' | 'cluster';
  readonly offered: number;
  readonly placed: number;
  readonly paid: number;
  readonly nodes: readonly BrokerNode[];
}

export interface BrokerDurability {
  readonly durability: 'none' | 'replica';
  /** Rows per second, the median of the repetitions. */
  readonly rowsPerSecond: number;
  readonly repetitions: number;
}

/** The deliveries of one PAID order: every subscription to the three events it takes (services.md). */
const DELIVERIES_PER_ORDER = (
  ['orders.order-placed.v1', 'inventory.stock-reserved.v1', 'payments.payment-captured.v1'] as const
).reduce((deliveries, type) => deliveries + subscribersOf(type).length, 0);

/**
 * One delivery as BullMQ makes it, with nothing of idem's: a job added, fetched by a worker at the
 * services' concurrency, handled by a function that does nothing, and completed — at the rate an
 * order's deliveries arrive at the offered load. What it costs is a floor under every order.
 */
export interface BareDelivery {
  readonly deliveries: number;
  /** Deliveries an order: the subscriptions to a PAID order's events (7). */
  readonly perOrder: number;
  /** Deliveries per second: an order's at the offered orders per second. */
  readonly perSecond: number;
  readonly concurrency: number;
  /** CPU of the process adding, fetching and completing (µs a delivery). */
  readonly clientUs: number;
  /** The redis-server's CPU (µs a delivery). */
  readonly redisUs: number;
  /** Scripts run (EVALSHA) a delivery: add, fetches, completion. */
  readonly scripts: number;
  /** Blocking waits for the next job (BZPOPMIN) a delivery. */
  readonly waits: number;
}

export interface BrokerResult {
  readonly loads: readonly BrokerLoad[];
  readonly durability: readonly BrokerDurability[];
  readonly bareDelivery?: BareDelivery;
  /** A bare delivery on each transport, side by side (transports.ts). */
  readonly transports?: readonly TransportDelivery[];
}

export interface BrokerOptions extends Pick<EndToEndOptions, 'stepSeconds' | 'drainSeconds' | 'log'> {
  readonly databaseUrl: string;
  readonly offered: number;
  readonly relayRows: number;
  readonly repetitions: number;
  /** Deliveries measured on each transport (transports.ts). */
  readonly transportDeliveries: number;
}

export async function runBroker(options: BrokerOptions): Promise<BrokerResult> {
  const { log } = options;
  const firstPort = randomInt(30_000, 30_900); // below the ephemeral range; the cluster bus 500 above
  const loads: BrokerLoad[] = [];
  const one = await startOneNode(firstPort + 10);
  let bareDelivery: BareDelivery;
  let transports: TransportDelivery[];
  try {
    bareDelivery = await bareDeliveries(one, DELIVERIES_PER_ORDER * options.offered, options.stepSeconds);
    log(
      `a bare BullMQ delivery at ${bareDelivery.perSecond}/s: ${bareDelivery.clientUs} µs of the client's CPU, ` +
        `${bareDelivery.redisUs} µs of Redis's, ${bareDelivery.scripts} scripts and ${bareDelivery.waits} waits`,
    );
    const rabbitmqUrl = process.env.RABBITMQ_URL ?? 'amqp://guest:guest@127.0.0.1:5672';
    transports = await transportDeliveries(one, rabbitmqUrl, options.transportDeliveries);
    for (const t of transports)
      log(
        `a bare delivery on ${t.transport}: ${t.perSecond}/s, ${t.clientUs} µs of the client's CPU and ` +
          `${t.brokerUs} µs of the broker's`,
      );
    loads.push(await underLoad('one node', one.url, [{ port: one.port, role: 'master', pid: one.pid }], options));
  } finally {
    await one.stop();
  }
  const cluster = await startRedisCluster({ firstPort });
  try {
    const roles = await rolesOf(cluster);
    loads.push(await underLoad('cluster', cluster.url, roles, options));
    const durability: BrokerDurability[] = [];
    for (const level of ['none', 'replica'] as const) {
      const rates: number[] = [];
      for (let repetition = 0; repetition <= options.repetitions; repetition++) {
        const rate = await relayRowsPerSecond({
          ...options,
          redisUrl: cluster.url,
          durability: level,
          rows: options.relayRows,
        });
        if (repetition > 0) rates.push(rate); // the first warms up
        log(`relay on the cluster, durability ${level}: ${Math.round(rate)} rows/s${repetition ? '' : ' (warm-up)'}`);
      }
      durability.push({ durability: level, rowsPerSecond: median(rates), repetitions: rates.length });
    }
    return { loads, durability, bareDelivery, transports };
  } finally {
    await cluster.stop();
  }
}

/** {@link BareDelivery}, measured on `node` for `seconds` at `perSecond`, after a warm-up second. */
async function bareDeliveries(
  node: { url: string; pid: number },
  perSecond: number,
  seconds: number,
): Promise<BareDelivery> {
  const concurrency = 8; // the services' CONSUMER_CONCURRENCY
  const prefix = `bare${Date.now()}`;
  const connection = new Redis(node.url, { maxRetriesPerRequest: null });
  const workerConnection = new Redis(node.url, { maxRetriesPerRequest: null });
  const queue = new Queue('bare', { connection, prefix });
  const worker = new Worker('bare', async () => {}, { connection: workerConnection, prefix, concurrency });
  let completed = countdown(0);
  worker.on('completed', () => completed.tick());
  const add = async (count: number, from: number) => {
    completed = countdown(count);
    // As idem publishes: its id is the message id, kept a while for BullMQ's own dedupe.
    await atRate(count, perSecond, (i) =>
      queue.add('m', { i: from + i }, { jobId: `m${from + i}`, removeOnComplete: { age: 3600 } }),
    );
    await completed.done;
  };
  try {
    await worker.waitUntilReady();
    await add(perSecond, 0);
    const calls = async () => commandCalls(await connection.info('commandstats'));
    const before = { cpu: process.cpuUsage(), redis: cpuOfProcess(node.pid), calls: await calls() };
    const deliveries = perSecond * seconds;
    await add(deliveries, perSecond);
    const cpu = process.cpuUsage(before.cpu);
    const [redisMs, after] = [cpuOfProcess(node.pid) - before.redis, await calls()];
    const per = (value: number) => Math.round((value / deliveries) * 10) / 10;
    const countOf = (name: string) => per((after.get(name) ?? 0) - (before.calls.get(name) ?? 0));
    return {
      deliveries,
      perOrder: DELIVERIES_PER_ORDER,
      perSecond,
      concurrency,
      clientUs: Math.round((cpu.user + cpu.system) / deliveries),
      redisUs: Math.round((redisMs * 1000) / deliveries),
      scripts: countOf('evalsha'),
      waits: countOf('bzpopmin'),
    };
  } finally {
    await worker.close();
    await queue.close();
    // BullMQ closes only the connections it made itself.
    for (const redis of [connection, workerConnection]) redis.disconnect();
  }
}

/** Calls so far of each command, from `INFO commandstats`. */
function commandCalls(commandStats: string): Map<string, number> {
  return new Map(
    [...commandStats.matchAll(/^cmdstat_([a-z|]+):calls=(\d+)/gm)].map(([, name, calls]) => [name!, Number(calls)]),
  );
}

/** The whole system on `redisUrl` for one load step; each node's CPU per placed order. */
async function underLoad(
  redis: BrokerLoad['redis'],
  redisUrl: string,
  nodes: readonly { port: number; role: BrokerNode['role']; pid: number }[],
  options: BrokerOptions,
): Promise<BrokerLoad> {
  const system = await startLoadedSystem({ portOffset: 800, log: options.log }, { redisUrl });
  try {
    await runStep(system, Math.max(1, Math.round(options.offered / 4)), { ...options, stepSeconds: 3 }); // warm-up
    const before = nodes.map((node) => cpuOfProcess(node.pid));
    const step = await runStep(system, options.offered, options);
    const after = nodes.map((node) => cpuOfProcess(node.pid));
    const measured = nodes.map(({ port, role }, i) => ({
      port,
      role,
      cpuMsPerOrder: Math.round(((after[i]! - before[i]!) / Math.max(1, step.placed)) * 100) / 100,
    }));
    options.log(
      `${redis}, ${options.offered} orders/s: ${measured.map((n) => `${n.role} ${n.port} ${n.cpuMsPerOrder} ms`).join(', ')} of CPU per order`,
    );
    return { redis, offered: options.offered, placed: step.placed, paid: step.paid, nodes: measured };
  } finally {
    await stopLoadedSystem(system);
  }
}

/** Each node of the cluster with its role now, and its process id. */
async function rolesOf(cluster: RedisCluster) {
  return Promise.all(
    cluster.nodes.map(async (node) => {
      const redis = new Redis({ host: '127.0.0.1', port: node.port, lazyConnect: true });
      try {
        const role = /role:master/.test(await redis.info('replication')) ? 'master' : 'replica';
        return { port: node.port, role: role as BrokerNode['role'], pid: node.process.pid! };
      } finally {
        redis.disconnect();
      }
    }),
  );
}

/** One redis-server of the bench's own, as the services' default setting runs it (no replica). */
async function startOneNode(port: number) {
  const dir = mkdtempSync(join(tmpdir(), 'idem-bench-redis-'));
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--dir', dir], {
    stdio: 'ignore',
  });
  const url = `redis://127.0.0.1:${port}`;
  const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  probe.on('error', () => {});
  try {
    await waitFor(
      () =>
        probe.ping().then(
          (pong) => pong === 'PONG',
          () => false,
        ),
      { what: 'the bench Redis' },
    );
  } finally {
    probe.disconnect();
  }
  return {
    port,
    url,
    pid: child.pid!,
    async stop() {
      child.kill('SIGTERM');
      await exited(child);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
