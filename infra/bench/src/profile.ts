/**
 * `pnpm bench:profile [orders/s] [seconds]`: where the CPU of an order goes, process by
 * process. Starts the whole system natively with every process under `node --cpu-prof`, places
 * orders at a steady rate (as the end-to-end section does), stops the system so each process
 * writes its profile, and attributes the samples taken while the load ran — start-up excluded —
 * to what spent them: a library, an idem package, the service's own code, or the runtime. Time
 * spent inside Node.js itself (streams, sockets, timers) is charged to the nearest caller that is
 * not Node.js, so "ioredis" includes the socket writes it asked for.
 */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SERVICES } from '@idem/native-run';
import { runStep, startLoadedSystem, stopLoadedSystem } from './end-to-end.js';
import { cpuOfProcess } from './cpu.js';
import { countingRoundTrips, roundTripsSoFar, type RoundTrips } from './round-trips.js';

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string };
  readonly children?: readonly number[];
}
interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly startTime: number;
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

/** Section 5 of a bench run. */
export interface EndToEndProfile {
  /** Orders per second while profiling. */
  readonly offered: number;
  readonly processes: Record<string, ProcessProfile>;
  /** PostgreSQL transactions and statements per service, Redis commands and scripts, per order. */
  readonly requestsPerOrder: Record<string, number>;
}

export interface ProcessProfile {
  /** CPU ms per order spent while the load ran (from /proc), split by the profile's shares of what spent it. */
  readonly msPerOrder: Record<string, number>;
  readonly totalMsPerOrder: number;
}

/** What a frame belongs to, from its script's URL; undefined for Node.js itself. */
export function ownerOf(url: string, functionName: string): string | undefined {
  const dependency = /node_modules\/(?:\.pnpm\/[^/]+\/node_modules\/)?((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1];
  if (dependency)
    return LIBRARY_GROUPS[dependency] ?? (dependency.startsWith('@opentelemetry/') ? 'OpenTelemetry' : dependency);
  const own = /\/(packages|services|infra)\/([^/]+)\//.exec(url);
  if (own) return own[1] === 'packages' ? `@idem/${own[2]}` : `${own[2]} (own code)`;
  if (url === '' && /^\((garbage collector|program)\)$/.test(functionName)) return functionName;
  return undefined;
}

/** Libraries that work together, counted together. */
const LIBRARY_GROUPS: Record<string, string> = {
  '@prisma/client': 'Prisma',
  '@prisma/client-runtime-utils': 'Prisma',
  '@prisma/adapter-pg': 'Prisma',
  '@prisma/driver-adapter-utils': 'Prisma',
  pg: 'node-postgres',
  'pg-protocol': 'node-postgres',
  'pg-pool': 'node-postgres',
  'pg-types': 'node-postgres',
  bullmq: 'BullMQ + ioredis',
  ioredis: 'BullMQ + ioredis',
  msgpackr: 'BullMQ + ioredis',
  'redis-parser': 'BullMQ + ioredis',
  express: 'express',
  'body-parser': 'express',
  router: 'express',
  pino: 'pino (logging)',
  'pino-std-serializers': 'pino (logging)',
  'sonic-boom': 'pino (logging)',
  'prom-client': 'prom-client (metrics)',
  zod: 'zod',
  tsx: 'tsx (loader)',
  esbuild: 'tsx (loader)',
};

/** Attributes the samples between `from` and `to` (µs on the monotonic clock every profile uses). */
export function attribute(profile: CpuProfile, from: number, to: number): Map<string, number> {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const ownerMemo = new Map<number, string>();
  const ownerOfNode = (id: number): string => {
    const known = ownerMemo.get(id);
    if (known) return known;
    const { callFrame } = byId.get(id)!;
    const own = ownerOf(callFrame.url, callFrame.functionName);
    const above = parent.get(id);
    const owner = own ?? (above === undefined ? 'Node.js (event loop, I/O, timers)' : ownerOfNode(above));
    ownerMemo.set(id, owner);
    return owner;
  };
  const totals = new Map<string, number>();
  let at = profile.startTime;
  for (const [i, sample] of profile.samples.entries()) {
    const delta = profile.timeDeltas[i] ?? 0;
    at += delta;
    if (at < from || at > to) continue;
    const { functionName } = byId.get(sample)!.callFrame;
    if (functionName === '(idle)') continue;
    const owner = ownerOfNode(sample);
    totals.set(owner, (totals.get(owner) ?? 0) + delta / 1000);
  }
  return totals;
}

export async function profileEndToEnd(options: {
  offered: number;
  seconds: number;
  portOffset: number;
  log: (line: string) => void;
}): Promise<Omit<EndToEndProfile, 'offered'>> {
  const dir = mkdtempSync(join(tmpdir(), 'idem-profile-'));
  const counting = countingRoundTrips();
  const system = await startLoadedSystem(options, {
    nodeOptions: ['--cpu-prof', `--cpu-prof-dir=${dir}`, ...counting.nodeOptions],
    env: counting.env,
  });
  const pids = new Map([...system.processes].map(([name, child]) => [child.pid!, name]));
  const cpuByProcess = () => new Map([...system.processes].map(([name, child]) => [name, cpuOfProcess(child.pid!)]));
  const cpuMs = new Map<string, number>();
  let window: [number, number];
  let placed: number;
  let requestsPerOrder: Record<string, number>;
  try {
    // Warm up (first requests compile code paths), then measure a steady step.
    await runStep(system, options.offered, { stepSeconds: 5, drainSeconds: 20, log: options.log });
    const from = Number(process.hrtime.bigint() / 1000n);
    const cpuBefore = cpuByProcess();
    const before = await roundTripsSoFar(system, counting.dir);
    const step = await runStep(system, options.offered, {
      stepSeconds: options.seconds,
      drainSeconds: 30,
      log: options.log,
    });
    window = [from, Number(process.hrtime.bigint() / 1000n)];
    const after = await roundTripsSoFar(system, counting.dir);
    const cpuAfter = cpuByProcess();
    for (const name of cpuAfter.keys()) cpuMs.set(name, cpuAfter.get(name)! - (cpuBefore.get(name) ?? 0));
    placed = step.placed;
    requestsPerOrder = requestsOf(before, after, placed);
    options.log(
      `${step.placed} orders at ${options.offered}/s: ${step.paid} paid, POST→PAID p95 ${step.paidMs.p95} ms`,
    );
  } finally {
    await stopLoadedSystem(system);
  }
  const byProcess = new Map<string, Map<string, number>>();
  // CPU.<date>.<time>.<pid>.<thread>.<sequence>.cpuprofile: a process's main thread and tsx's loader thread.
  for (const file of readdirSync(dir).filter((name) => name.endsWith('.cpuprofile'))) {
    const name = pids.get(Number(file.split('.')[3]));
    if (!name) continue; // a migration run
    const totals = byProcess.get(name) ?? new Map<string, number>();
    byProcess.set(name, totals);
    for (const [owner, ms] of attribute(JSON.parse(readFileSync(join(dir, file), 'utf8')) as CpuProfile, ...window)) {
      totals.set(owner, (totals.get(owner) ?? 0) + ms);
    }
  }
  // A sample's interval is wall time: on busy cores a process waiting for one is still "running".
  // So the profile gives each process's shares, and /proc its CPU.
  const result: Record<string, ProcessProfile> = {};
  for (const [name, totals] of byProcess) {
    const sampled = [...totals.values()].reduce((sum, ms) => sum + ms, 0);
    const totalMsPerOrder = (cpuMs.get(name) ?? 0) / placed;
    const round = (ms: number) => Math.round(ms * 100) / 100;
    result[name] = {
      totalMsPerOrder: round(totalMsPerOrder),
      msPerOrder: Object.fromEntries(
        [...totals].sort((a, b) => b[1] - a[1]).map(([owner, ms]) => [owner, round((ms / sampled) * totalMsPerOrder)]),
      ),
    };
  }
  return { processes: result, requestsPerOrder };
}

/** Per order and per service, as the report lists them: `PostgreSQL statements: orders`, … */
function requestsOf(before: RoundTrips, after: RoundTrips, placed: number): Record<string, number> {
  const labels = {
    statements: 'PostgreSQL statements',
    transactions: 'PostgreSQL transactions',
    redisScripts: 'Redis scripts',
    redisCommands: 'Redis commands',
  } as const;
  const requests: Record<string, number> = {};
  const perOrder = (count: number) => Math.round((count / placed) * 10) / 10;
  for (const [kind, label] of Object.entries(labels) as [keyof typeof labels, string][]) {
    for (const service of SERVICES) {
      requests[`${label}: ${service}`] = perOrder(after.byService[service][kind] - before.byService[service][kind]);
    }
  }
  // What they were: the statements by service and kind, the scripts and other commands by name.
  for (const [counts, label] of [
    [(at: RoundTrips) => at.statementKinds, 'statement'],
    [(at: RoundTrips) => at.scripts, 'script'],
    [(at: RoundTrips) => at.commands, 'command'],
  ] as const) {
    const kinds = Object.entries(counts(after))
      .map(([kind, n]) => [kind, perOrder(n - (counts(before)[kind] ?? 0))] as const)
      .filter(([, n]) => n >= 0.1)
      .sort((a, b) => b[1] - a[1]);
    for (const [kind, n] of kinds) requests[`${label} ${kind}`] = n;
  }
  return requests;
}

// Runs when started (`pnpm bench:profile`); importing it runs nothing.
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [offered = 15, seconds = 30] = process.argv.slice(2).map(Number);
  const { processes, requestsPerOrder } = await profileEndToEnd({
    offered,
    seconds,
    portOffset: 700,
    log: (line) => console.log(line),
  });
  console.log('\nper order:');
  for (const [what, count] of Object.entries(requestsPerOrder)) console.log(`  ${String(count).padStart(6)}  ${what}`);
  for (const [name, profile] of Object.entries(processes).sort((a, b) => b[1].totalMsPerOrder - a[1].totalMsPerOrder)) {
    console.log(`\n${name}: ${profile.totalMsPerOrder} ms of CPU per order`);
    for (const [owner, ms] of Object.entries(profile.msPerOrder))
      if (ms >= 0.05) console.log(`  ${ms.toFixed(2).padStart(6)}  ${owner}`);
  }
}
