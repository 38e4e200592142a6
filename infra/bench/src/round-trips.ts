/**
 * What an order asks of PostgreSQL and Redis — statements, transactions, Lua scripts (BullMQ's
 * and the rate limiter's) — per service, counted by the processes themselves
 * (count-round-trips.ts, preloaded). Counts are deterministic where rates are noisy, so they are
 * budgets: `pnpm bench` prints them against the targets, and e2e/round-trips.e2e.spec.ts fails
 * when one grows past what the code needs today.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SERVICES, type RunningSystem, type ServiceName as Service } from '@idem/native-run';
import type { RoundTripCounts } from './count-round-trips.js';
import { runStep, startLoadedSystem, stopLoadedSystem } from './end-to-end.js';
import { sleep } from './stats.js';

export type { RoundTripCounts };

/** Preload it (`--import`) with IDEM_ROUND_TRIP_DIR set, and a process counts its round trips. */
export const ROUND_TRIP_PRELOAD = fileURLToPath(new URL('./count-round-trips.ts', import.meta.url));

/** What a budget bounds: the PostgreSQL and BullMQ round trips (Redis commands are only reported). */
export type RoundTripBudget = Pick<RoundTripCounts, 'statements' | 'transactions' | 'redisScripts'>;

/** What an order may ask at 20 orders/s, all services together: the targets `pnpm bench` prints as PASS/MISS. */
export const ROUND_TRIP_TARGETS: RoundTripBudget = { statements: 25, transactions: 7, redisScripts: 14 };

/** Statements an order may ask at light load (10 orders/s and below), where nothing batches. */
export const LIGHT_LOAD_STATEMENTS = 35;

/**
 * What an order asks of each service today at light load (orders one by one, nothing to batch
 * with), with a little room: the ceiling the budget test holds, for every service (a new one
 * states its own). Lower a figure when a change lowers the count; a change that has to raise one
 * says why here. Measured 2026-12-03, the workers' claims counted, the outbox handed over at
 * commit, each e-mail taken by its own process's dispatcher, a capture and its event recorded in
 * one statement, orders' two moves, inventory's reservation (with its event) and commitment,
 * payments' opening and notifications' two e-mails (with the order's summary) delivered in one
 * statement with their inbox records, and the order placed in one statement with its event and
 * key (statements / transactions / scripts): orders 4.3 / 4.1 / 11.8, inventory 2.8 / 2.9 / 9.8,
 * payments 4 / 4 / 6.9, notifications 5 / 5 / 7.8 — 16.1 statements, 16 transactions, 36.3
 * scripts in all (docs/benchmarks/log.md, "Round trips"). Scripts measured again 2026-12-04 with
 * BullMQ's fetch patched (patches/README.md: a fetch wakes another worker only when a job is left):
 * orders 9.7, inventory 7.8, payments 5.9, notifications 5.8 — 29.2 in all; and again with the
 * fetch saying when it left nothing to take (the worker waits instead of asking again): orders 7.7,
 * inventory 5.8, payments 4.9, notifications 3.8 — 22.2 in all. Notifications' transactions went
 * up by one: the receipt reads the order's summary before its one statement, an autocommit read
 * (no commit record) where it was a statement inside the inbox's transaction. Scripts measured
 * again (CI on 181f436) with subscriptions owned by consumers (a stream per contract; each consumer's
 * forwarder adds the job to its own queue, where the producer's relay added it before): the same
 * 22.2 in all, moved from producer to consumer — payments 4.9 → 2.9, notifications 3.8 → 5.8
 * (its two e-mails' jobs are now added by its own forwarder); orders 7.7 and inventory 5.8
 * unchanged. With the forwarder gone (one hop: the producer adds each job to every subscriber's
 * queue again, having read the subscribers), they move back: payments adds, notifications only takes.
 */
export const ROUND_TRIP_BUDGET: Readonly<Record<string, RoundTripBudget>> = {
  orders: { statements: 4.5, transactions: 4.5, redisScripts: 8.5 },
  inventory: { statements: 3.5, transactions: 3.5, redisScripts: 6.5 },
  payments: { statements: 4.5, transactions: 4.5, redisScripts: 5.5 },
  notifications: { statements: 5.5, transactions: 5.5, redisScripts: 4.5 },
};

/** How long the services are watched doing nothing, to take off what they ask anyway. */
const IDLE_MS = 8_000;

const KINDS = ['statements', 'transactions', 'redisCommands', 'redisScripts'] as const;

/** Per service. */
export type Counts = Record<Service, RoundTripCounts>;

/** The system's processes keep their counts in a directory of their own: start the system with these. */
export function countingRoundTrips(): { dir: string; nodeOptions: string[]; env: Record<string, string> } {
  const dir = mkdtempSync(join(tmpdir(), 'idem-round-trips-'));
  return { dir, nodeOptions: ['--import', ROUND_TRIP_PRELOAD], env: { IDEM_ROUND_TRIP_DIR: dir } };
}

/**
 * Per order and per service at light load: the system with every process counting, a warm-up,
 * an idle window (what the services ask with nothing to do: polls, BullMQ's own checks), then
 * `orders` orders placed at 2 a second — each one alone, nothing to batch with — each to PAID
 * and its receipt sent; what the idle window says they would have asked anyway is taken off.
 */
export async function measureRoundTrips(options: {
  orders: number;
  portOffset: number;
  log: (line: string) => void;
}): Promise<RoundTrips> {
  const counting = countingRoundTrips();
  // The workers' polls far apart: a claim a notification starts is work, and counts; only what
  // the services ask on a clock of their own (the relay's poll, BullMQ's checks) is taken off.
  const quietWorkers = { PAYMENT_WORKER_POLL_MS: '600000', DISPATCHER_POLL_MS: '600000' };
  const system = await startLoadedSystem(options, { ...counting, env: { ...counting.env, ...quietWorkers } });
  try {
    const step = (seconds: number) => runStep(system, 2, { stepSeconds: seconds, drainSeconds: 30, log: options.log });
    await step(2); // the first requests compile code paths and open connections
    const soFar = () => roundTripsSoFar(system, counting.dir);
    const idleBefore = await soFar();
    await sleep(IDLE_MS);
    const idle = { before: idleBefore, after: await soFar(), ms: IDLE_MS };
    const started = Date.now();
    const before = await soFar();
    const { placed, paid, receipts } = await step(options.orders / 2);
    if (paid < placed || receipts < placed)
      throw new Error(`${placed} orders placed, ${paid} paid, ${receipts} receipts`);
    const busy = { before, after: await soFar(), ms: Date.now() - started };
    return perOrder(busy, idle, placed);
  } finally {
    await stopLoadedSystem(system);
  }
}

/**
 * What the services asked (so far, or per order): each service's counts, the Lua scripts and the
 * other Redis commands by name, and the statements by service and kind (`orders: INSERT processed_messages`).
 */
export interface RoundTrips {
  readonly byService: Counts;
  readonly scripts: Record<string, number>;
  readonly commands: Record<string, number>;
  readonly statementKinds: Record<string, number>;
}

/** So far, each service's instances added up. */
export async function roundTripsSoFar(system: RunningSystem, dir: string): Promise<RoundTrips> {
  const instances = [...system.processes].filter(([name]) => serviceOf(name) !== undefined);
  const byService = Object.fromEntries(SERVICES.map((service) => [service, zero()])) as Counts;
  const scripts: Record<string, number> = {};
  const commands: Record<string, number> = {};
  const statementKinds: Record<string, number> = {};
  await Promise.all(
    instances.map(async ([name, child]) => {
      const file = join(dir, `round-trips.${child.pid}.json`);
      const last = readAnswer(file)?.answer ?? 0;
      child.kill('SIGUSR2');
      let counts = readAnswer(file);
      for (let waited = 0; (counts?.answer ?? 0) <= last; waited += 20) {
        if (waited > 5_000) throw new Error(`${name} did not write its round trips within 5 s`);
        await sleep(20);
        counts = readAnswer(file);
      }
      for (const kind of KINDS) byService[serviceOf(name)!][kind] += counts![kind];
      for (const [script, n] of Object.entries(counts!.scripts)) scripts[script] = (scripts[script] ?? 0) + n;
      for (const [command, n] of Object.entries(counts!.commands ?? {}))
        commands[command] = (commands[command] ?? 0) + n;
      for (const [kind, n] of Object.entries(counts!.statementKinds ?? {})) {
        const key = `${serviceOf(name)!}: ${kind}`;
        statementKinds[key] = (statementKinds[key] ?? 0) + n;
      }
    }),
  );
  return { byService, scripts, commands, statementKinds };
}

/** A window of the run: the counts at its start and end, and how long it lasted. */
interface Window {
  readonly before: RoundTrips;
  readonly after: RoundTrips;
  readonly ms: number;
}

/** Per order: what `busy` asked for `orders` orders, less what `idle` asks in as long with nothing to do. */
export function perOrder(busy: Window, idle: Window, orders: number): RoundTrips {
  const net = (count: (at: RoundTrips) => number) => {
    const during = (window: Window) => count(window.after) - count(window.before);
    const background = (during(idle) * busy.ms) / idle.ms;
    return Math.round((Math.max(0, during(busy) - background) / orders) * 10) / 10;
  };
  const byService = {} as Counts;
  for (const service of SERVICES) {
    byService[service] = zero();
    for (const kind of KINDS) byService[service][kind] = net((at) => at.byService[service][kind]);
  }
  const netted = (of: (at: RoundTrips) => Record<string, number>) => {
    const counts: Record<string, number> = {};
    for (const name of Object.keys(of(busy.after))) {
      const count = net((at) => of(at)[name] ?? 0);
      if (count > 0) counts[name] = count;
    }
    return counts;
  };
  return {
    byService,
    scripts: netted((at) => at.scripts),
    commands: netted((at) => at.commands),
    statementKinds: netted((at) => at.statementKinds),
  };
}

/** All services together. */
export function total(counts: Counts): RoundTripCounts {
  const sum = zero();
  for (const service of SERVICES) for (const kind of KINDS) sum[kind] += counts[service][kind];
  for (const kind of KINDS) sum[kind] = Math.round(sum[kind] * 10) / 10;
  return sum;
}

const zero = (): RoundTripCounts => ({ statements: 0, transactions: 0, redisCommands: 0, redisScripts: 0 });

/** `payments-2` → payments; undefined for the simulators and the console. */
const serviceOf = (part: string): Service | undefined =>
  SERVICES.find((service) => part === service || (part.startsWith(`${service}-`) && /-\d+$/.test(part)));

type Answer = RoundTripCounts & {
  scripts: Record<string, number>;
  commands?: Record<string, number>;
  statementKinds?: Record<string, number>;
  answer: number;
};

function readAnswer(file: string): Answer | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Answer;
  } catch {
    return undefined; // not written yet
  }
}
