/**
 * What an order asks of PostgreSQL and Redis — statements, transactions, BullMQ scripts — per
 * service, counted by the processes themselves (count-round-trips.ts, preloaded). Counts are
 * deterministic where rates are noisy, so they are budgets: `pnpm bench` prints them against
 * the targets, and e2e/round-trips.e2e.spec.ts fails when one grows past what the code needs today.
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

/** What an order may ask, all services together: the targets `pnpm bench` prints as PASS/MISS. */
export const ROUND_TRIP_TARGETS: RoundTripBudget = { statements: 30, transactions: 8, redisScripts: 20 };

/**
 * What an order asks of each service today at light load (orders one by one, nothing to batch
 * with), with a little room: the ceiling the budget test holds. Lower a figure when a change
 * lowers the count; a change that has to raise one says why here. Measured 2026-12-01: orders
 * 32 / 4 / 11.8, inventory 18 / 3 / 9.8, payments 15.2 / 4.2 / 6.9, notifications 15 / 7 / 7.8 —
 * 80 statements, 18.2 transactions, 36.3 scripts in all.
 */
export const ROUND_TRIP_BUDGET: Record<Service, RoundTripBudget> = {
  orders: { statements: 33, transactions: 4.5, redisScripts: 12.5 },
  inventory: { statements: 19, transactions: 3.5, redisScripts: 10.5 },
  payments: { statements: 16, transactions: 4.7, redisScripts: 7.5 },
  notifications: { statements: 16, transactions: 7.5, redisScripts: 8.5 },
};

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
}): Promise<Counts> {
  const counting = countingRoundTrips();
  const system = await startLoadedSystem(options, counting);
  try {
    const step = (seconds: number) => runStep(system, 2, { stepSeconds: seconds, drainSeconds: 30, log: options.log });
    await step(2); // the first requests compile code paths and open connections
    const idleMs = 8_000;
    const idle = { before: await roundTripsSoFar(system, counting.dir), idleMs };
    await sleep(idleMs);
    const idleAfter = await roundTripsSoFar(system, counting.dir);
    const started = Date.now();
    const before = await roundTripsSoFar(system, counting.dir);
    const { placed, paid, receipts } = await step(options.orders / 2);
    if (paid < placed || receipts < placed)
      throw new Error(`${placed} orders placed, ${paid} paid, ${receipts} receipts`);
    const after = await roundTripsSoFar(system, counting.dir);
    return perOrder({ before, after, orders: placed, busyMs: Date.now() - started }, { ...idle, after: idleAfter });
  } finally {
    await stopLoadedSystem(system);
  }
}

/** Each service's counts so far (every instance of it added up). */
export async function roundTripsSoFar(system: RunningSystem, dir: string): Promise<Counts> {
  const instances = [...system.processes].filter(([name]) => serviceOf(name) !== undefined);
  const totals = Object.fromEntries(SERVICES.map((service) => [service, zero()])) as Counts;
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
      for (const kind of KINDS) totals[serviceOf(name)!][kind] += counts![kind];
    }),
  );
  return totals;
}

/**
 * Per order: what the services asked between `before` and `after` for `orders` orders, less what
 * they ask when idle (`idle`, counted over `idleMs`) for as long as the orders took (`busyMs`).
 */
export function perOrder(
  { before, after, orders, busyMs }: { before: Counts; after: Counts; orders: number; busyMs: number },
  idle: { before: Counts; after: Counts; idleMs: number },
): Counts {
  const result = {} as Counts;
  for (const service of SERVICES) {
    result[service] = zero();
    for (const kind of KINDS) {
      const busy = after[service][kind] - before[service][kind];
      const background = ((idle.after[service][kind] - idle.before[service][kind]) * busyMs) / idle.idleMs;
      result[service][kind] = Math.round((Math.max(0, busy - background) / orders) * 10) / 10;
    }
  }
  return result;
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

function readAnswer(file: string): (RoundTripCounts & { answer: number }) | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as RoundTripCounts & { answer: number };
  } catch {
    return undefined; // not written yet
  }
}
