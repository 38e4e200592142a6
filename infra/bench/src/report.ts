import { POOLED_RELAY_CONCURRENCY } from '@idem/outbox';
import { CONSUMER_VARIANTS, type ConsumerSample, type ConsumerVariant, type DeliveryMode } from './consumer-cost.js';
import type { BareDelivery, BrokerResult } from './broker.js';
import type { CpuTimes } from './cpu.js';
import { EMAIL_DRAIN_TARGET, type EmailDrainResult } from './email-drain.js';
import type { EndToEndResult } from './end-to-end.js';
import type { GrowthSample } from './growth.js';
import { HOPS } from './hops.js';
import type { EndToEndProfile } from './profile.js';
import { LIGHT_LOAD_STATEMENTS, ROUND_TRIP_TARGETS, type RoundTripBudget } from './round-trips.js';
import { SIDE_BY_SIDE, type RelaySample } from './relay.js';
import { median } from './stats.js';

/** Everything one `pnpm bench` run measured: written as JSON, rendered as Markdown. */
export interface BenchRun {
  readonly startedAt: string;
  readonly finishedAt: string;
  readonly quick: boolean;
  readonly machine: Record<string, string>;
  readonly settings: Record<string, unknown>;
  readonly consumerCost?: ConsumerSample[];
  readonly relay?: RelaySample[];
  readonly endToEnd?: EndToEndResult;
  readonly growth?: GrowthSample[];
  readonly profile?: EndToEndProfile;
  readonly broker?: BrokerResult;
  readonly emailDrain?: EmailDrainResult;
}

export interface Target {
  readonly name: string;
  readonly measured: string;
  readonly pass: boolean;
}

/** Median msgs/s of one variant, mode and concurrency across the repetitions. */
function rate(samples: readonly ConsumerSample[], variant: ConsumerVariant, mode: DeliveryMode, concurrency: number) {
  const values = samples
    .filter((s) => s.variant === variant && s.mode === mode && s.concurrency === concurrency)
    .map((s) => s.perSecond);
  return values.length > 0 ? median(values) : undefined;
}

function medianCpu(samples: readonly ConsumerSample[] | readonly RelaySample[]): CpuTimes {
  const of = (key: keyof CpuTimes) => median(samples.map((s) => s.cpu[key]));
  return { bench: of('bench'), postgres: of('postgres'), redis: of('redis') };
}

/**
 * Two variants measured back to back in each repetition: the median over repetitions of
 * `baseline`'s CPU per first delivery (all parts) over `other`'s, and of `other`'s rate over
 * `baseline`'s.
 */
function pairedByRepetition(
  samples: readonly ConsumerSample[],
  baseline: ConsumerVariant,
  other: ConsumerVariant,
  concurrency: number,
): { cpu: number | undefined; rate: number | undefined } {
  const of = (variant: ConsumerVariant) =>
    new Map(
      samples
        .filter((s) => s.variant === variant && s.mode === 'first' && s.concurrency === concurrency)
        .map((s) => [s.repetition, s]),
    );
  const base = of(baseline);
  const pairs = [...of(other)].flatMap(([repetition, sample]) => {
    const twin = base.get(repetition);
    return twin ? [[twin, sample] as const] : [];
  });
  if (pairs.length === 0) return { cpu: undefined, rate: undefined };
  const total = (cpu: CpuTimes) => cpu.bench + cpu.postgres + cpu.redis;
  const cpus = pairs.filter(([a, b]) => total(a.cpu) > 0 && total(b.cpu) > 0);
  return {
    cpu: cpus.length > 0 ? median(cpus.map(([a, b]) => total(a.cpu) / total(b.cpu))) : undefined,
    rate: median(pairs.map(([a, b]) => b.perSecond / a.perSecond)),
  };
}

const concurrenciesOf = (samples: readonly ConsumerSample[]) => [...new Set(samples.map((s) => s.concurrency))];

export function evaluateTargets(run: BenchRun): Target[] {
  const targets: Target[] = [];
  const cost = run.consumerCost ?? [];
  const ratio = (a: number | undefined, b: number | undefined) => (a !== undefined && b ? a / b : undefined);
  const add = (name: string, value: number | undefined, minimum: number, beside = '') => {
    if (value !== undefined) targets.push({ name, measured: `${value.toFixed(2)}×${beside}`, pass: value >= minimum });
  };
  // Group commit batches the deliveries in flight at once: the targets are where there are several.
  const batched = concurrenciesOf(cost).filter((c) => c >= 8);
  /** (a)'s latency from the start of handling a delivery to its settlement, shown beside its targets. */
  const latency = (c: number) => {
    const of = (p: 'p50' | 'p99') =>
      median(
        cost
          .filter((s) => s.variant === 'a' && s.mode === 'first' && s.concurrency === c && s.latency)
          .map((s) => s.latency![p]),
      ).toFixed(1);
    return ` (latency to settlement p50 ${of('p50')} ms, p99 ${of('p99')} ms)`;
  };
  for (const c of batched) {
    add(
      `(a) ≥ 1.0 × (c), first deliveries, concurrency ${c}`,
      ratio(rate(cost, 'a', 'first', c), rate(cost, 'c', 'first', c)),
      1,
      latency(c),
    );
  }
  for (const c of batched) {
    add(
      `group commit is the better default: (a) ≥ 1.0 × (s), first deliveries, concurrency ${c}`,
      ratio(rate(cost, 'a', 'first', c), rate(cost, 's', 'first', c)),
      1,
    );
  }
  for (const c of concurrenciesOf(cost)) {
    // CPU per delivery, (a) and (j) of the same repetition side by side: a rate on two shared
    // cores moves ±10% between runs; what a delivery costs, paired, moves far less.
    const paired = pairedByRepetition(cost, 'a', 'j', c);
    add(
      `the delivery journal costs ≤ 5%: CPU per first delivery, (a) ≥ 0.95 × (j), paired by repetition, concurrency ${c}`,
      paired.cpu,
      0.95,
      paired.rate === undefined ? '' : ` (rates, paired: (j) ${paired.rate.toFixed(2)} × (a))`,
    );
  }
  add(
    '(a) ≥ 2 × (e) at concurrency 8, first deliveries',
    ratio(rate(cost, 'a', 'first', 8), rate(cost, 'e', 'first', 8)),
    2,
  );
  for (const c of batched) {
    add(
      `(a) ≥ 2 × (f), the peer with its replication listener, concurrency ${c}`,
      ratio(rate(cost, 'a', 'first', c), rate(cost, 'f', 'first', c)),
      2,
      latency(c),
    );
  }
  for (const c of concurrenciesOf(cost)) {
    add(
      `duplicates through (a) ≥ 2× cheaper than first deliveries, concurrency ${c}`,
      ratio(rate(cost, 'a', 'duplicate', c), rate(cost, 'a', 'first', c)),
      2,
    );
  }
  const relay = run.relay ?? [];
  const relayRate = (variant: RelaySample['variant']) => {
    const values = relay.filter((s) => s.variant === variant).map((s) => s.rowsPerSecond);
    return values.length > 0 ? median(values) : undefined;
  };
  add("one relay at the services' defaults ≥ 0.8 × raw addBulk", ratio(relayRate('relay'), relayRate('addBulk')), 0.8);
  add(`${SIDE_BY_SIDE} relays side by side ≥ 0.7 × raw addBulk`, ratio(relayRate('relays'), relayRate('addBulk')), 0.7);
  const endToEnd = run.endToEnd;
  if (endToEnd?.steps.length) {
    const knee = endToEnd.steps.find((step) => step.offered === endToEnd.knee);
    targets.push({
      name: 'end to end: knee ≥ 30 orders/s',
      measured: `${endToEnd.knee ?? 'none'}`,
      pass: (endToEnd.knee ?? 0) >= 30,
    });
    const at20 = endToEnd.steps.find((step) => step.offered === 20);
    if (at20) {
      const cpu = Object.values(at20.cpuMsPerOrder).reduce((sum, ms) => sum + ms, 0);
      // BullMQ alone, measured in section 6: the floor under the figure (bareDeliveryLine).
      const bare = run.broker?.bareDelivery;
      const floor = bare
        ? `; BullMQ alone, ${bare.perOrder} bare deliveries: ${bareDeliveryMs(bare).toFixed(1)} ms`
        : '';
      targets.push({
        name: 'end to end: ≤ 50 ms of CPU per order at 20 orders/s, all processes',
        measured: `${cpu.toFixed(1)} ms${floor}`,
        pass: cpu <= 50,
      });
      const services = Object.entries(at20.rssMb ?? {}).filter(([name]) => !/sim|sink|console/.test(name));
      if (services.length > 0)
        targets.push({
          name: 'end to end: ≤ 150 MB resident per service process at 20 orders/s',
          measured: services.map(([name, mb]) => `${name} ${Math.round(mb)}`).join(', '),
          pass: services.every(([, mb]) => mb <= 150),
        });
    }
    // No loop without work: a process at rest blocks on what wakes it (end-to-end.ts, IdleCpu).
    const idle = endToEnd.idle;
    if (idle) {
      const shares = Object.entries(idle.atRest).filter(([part]) => part !== 'load generator');
      const [part, busiest] = shares.reduce((a, b) => (b[1] > a[1] ? b : a), ['none', 0]);
      targets.push({
        name: 'end to end: ≤ 1% of a core per process with the system at rest',
        measured: `busiest ${part} ${ofACore(busiest)} (at 1 order/s: ${ofACore(idle.atOnePerSecond[part])})`,
        pass: shares.every(([, core]) => core <= 0.01),
      });
    }
    // At light load an order's latency is waits, not work: every hop wakes on the event that makes work available.
    const light = endToEnd.steps.find((step) => step.offered === 10);
    if (light) {
      const latency = (name: string, ms: number, limit: number) =>
        targets.push({
          name: `end to end at 10 orders/s: ${name} ≤ ${limit} ms`,
          measured: `${ms} ms`,
          pass: ms <= limit,
        });
      latency('POST→PAID p50', light.paidMs.p50, 150);
      latency('POST→PAID p95', light.paidMs.p95, 400);
      latency('POST→receipt p95', light.receiptMs.p95, 600);
    }
    if (knee) {
      const cpu = Object.values(knee.cpuMsPerOrder).reduce((sum, ms) => sum + ms, 0);
      targets.push({
        name: 'end to end (the compass goal): ≤ 30 ms of CPU per order at the knee, all processes',
        measured: `${cpu.toFixed(1)} ms at ${knee.offered} orders/s`,
        pass: cpu <= 30,
      });
    }
  }
  if (run.profile) {
    // Counted by the processes themselves while the profile's load ran (round-trips.ts).
    const perOrder = (label: string) =>
      Object.entries(run.profile!.requestsPerOrder)
        .filter(([what]) => what.startsWith(`${label}: `))
        .reduce((sum, [, count]) => sum + count, 0);
    const at = `at ${run.profile.offered} orders/s`;
    // Under load (20 orders/s) every target; at light load, where nothing batches, statements only.
    const under: Partial<RoundTripBudget> =
      run.profile.offered >= 20 ? ROUND_TRIP_TARGETS : { statements: LIGHT_LOAD_STATEMENTS };
    for (const [label, limit] of [
      ['PostgreSQL statements', under.statements],
      ['PostgreSQL transactions', under.transactions],
      ['Redis scripts', under.redisScripts],
    ] as const) {
      if (limit === undefined) continue;
      const count = perOrder(label);
      targets.push({
        name: `round trips: ≤ ${limit} ${label} per order`,
        measured: `${count.toFixed(1)} ${at}`,
        pass: count <= limit,
      });
    }
  }
  if (run.emailDrain) {
    const { emails, connections, perSecond } = run.emailDrain;
    targets.push({
      name: `a backlog of ${emails.toLocaleString('en')} e-mails drains at ≥ ${EMAIL_DRAIN_TARGET} e-mails/s against the SMTP sink (${connections} connections)`,
      measured: `${Math.round(perSecond)} e-mails/s`,
      pass: perSecond >= EMAIL_DRAIN_TARGET,
    });
  }
  return targets;
}

export function formatTargets(targets: readonly Target[]): string {
  return targets.map((t) => `${t.pass ? 'PASS' : 'MISS'}  ${t.name}: ${t.measured}`).join('\n');
}

const int = (value: number | undefined) => (value === undefined ? '–' : Math.round(value).toLocaleString('en'));
const times = (value: number | undefined) => (value === undefined ? '–' : `${value.toFixed(2)}×`);
const mb = (bytes: number) => (bytes / 1_048_576).toFixed(1);

function table(header: string[], rows: string[][]): string {
  return [
    `| ${header.join(' | ')} |`,
    `| ${header.map((_, i) => (i === 0 ? '---' : '---:')).join(' | ')} |`,
    ...rows.map((row) => `| ${row.join(' | ')} |`),
  ].join('\n');
}

function consumerTables(samples: readonly ConsumerSample[]): string {
  const concurrencies = concurrenciesOf(samples);
  const variants = Object.keys(CONSUMER_VARIANTS) as ConsumerVariant[];
  const sections = (['first', 'duplicate'] as const).map((mode) => {
    const rows = variants
      .filter((v) => samples.some((s) => s.variant === v))
      .map((variant) => [
        `(${variant})`,
        ...concurrencies.flatMap((c) => {
          const value = rate(samples, variant, mode, c);
          return [
            int(value),
            times(value && rate(samples, 'b', mode, c) && value / rate(samples, 'b', mode, c)!),
            times(value && rate(samples, 'd', mode, c) && value / rate(samples, 'd', mode, c)!),
          ];
        }),
      ]);
    const header = ['variant', ...concurrencies.flatMap((c) => [`c=${c} msgs/s`, '÷ (b)', '÷ (d)'])];
    return `**${mode === 'first' ? 'First deliveries' : 'Duplicates (every message already processed)'}** — median msgs/s\n\n${table(header, rows)}`;
  });
  const c = concurrencies.includes(8) ? 8 : concurrencies[0]!;
  const cpuRows = variants.flatMap((variant) =>
    (['first', 'duplicate'] as const).flatMap((mode) => {
      const picked = samples.filter((s) => s.variant === variant && s.mode === mode && s.concurrency === c);
      if (picked.length === 0) return [];
      const cpu = medianCpu(picked);
      const total = cpu.bench + cpu.postgres + cpu.redis;
      return [
        [`(${variant}) ${mode}`, cpu.bench.toFixed(3), cpu.postgres.toFixed(3), cpu.redis.toFixed(3), total.toFixed(3)],
      ];
    }),
  );
  return [
    ...sections,
    brokerShare(samples, c),
    `**Where the CPU goes** — ms of CPU per message at concurrency ${c} (median; "client" is the bench process: BullMQ worker, Prisma, node-postgres, or pgbench)\n\n${table(
      ['variant', 'client', 'PostgreSQL', 'Redis', 'total'],
      cpuRows,
    )}`,
  ].join('\n\n');
}

/** What (a) spends beyond (c), part by part: the price of the broker and of idem's own steps. */
function brokerShare(samples: readonly ConsumerSample[], c: number): string {
  const cpuOf = (variant: ConsumerVariant) =>
    medianCpu(samples.filter((s) => s.variant === variant && s.mode === 'first' && s.concurrency === c));
  if (!samples.some((s) => s.variant === 'a') || !samples.some((s) => s.variant === 'c')) return '';
  const a = cpuOf('a');
  const cc = cpuOf('c');
  const total = (t: CpuTimes) => t.bench + t.postgres + t.redis;
  const ms = (value: number) => `${value.toFixed(2)} ms`;
  const more = (value: number) => `${ms(Math.abs(value))} ${value >= 0 ? 'more' : 'less'}`;
  return (
    `At concurrency ${c}, a first delivery through (a) costs ${ms(total(a))} of CPU against ${ms(total(cc))} for (c): ` +
    `${more(a.redis - cc.redis)} in Redis, ${more(a.bench - cc.bench)} in the consumer process ` +
    `(the BullMQ worker, the envelope check, the body hash, the settlement) and ${more(a.postgres - cc.postgres)} in PostgreSQL. ` +
    '(c) has no broker at all and a transaction per message; (a) shares one transaction among the deliveries in flight (group commit), so it can pass (c) only where several are in flight.'
  );
}

function relayTable(samples: readonly RelaySample[]): string {
  const name = {
    relay: `one idem relay as the services run it (claim, publish, mark; its own pool, ${POOLED_RELAY_CONCURRENCY} batches in flight)`,
    relays: `${SIDE_BY_SIDE} idem relays side by side`,
    addBulk: 'raw BullMQ addBulk',
  } as const;
  const variants = (['relay', 'relays', 'addBulk'] as const).filter((v) => samples.some((s) => s.variant === v));
  const rows = variants.map((variant) => {
    const picked = samples.filter((s) => s.variant === variant);
    const perSecond = median(picked.map((s) => s.rowsPerSecond));
    const cpu = medianCpu(picked);
    return [
      name[variant],
      int(perSecond),
      int(perSecond * (picked[0]!.jobs / picked[0]!.rows)),
      cpu.bench.toFixed(3),
      cpu.postgres.toFixed(3),
      cpu.redis.toFixed(3),
    ];
  });
  return table(['path', 'rows/s', 'jobs/s', 'client CPU ms/row', 'PostgreSQL', 'Redis'], rows);
}

function endToEndTable(result: EndToEndResult): string {
  const rows = result.steps.map((s) => [
    String(s.offered),
    String(s.achieved),
    `${s.paid}/${s.placed}`,
    int(s.paidMs.p50),
    int(s.paidMs.p95),
    int(s.paidMs.p99),
    int(s.receiptMs.p50),
    int(s.receiptMs.p95),
    int(s.receiptMs.p99),
    s.keptUp ? 'yes' : 'no',
  ]);
  return table(
    [
      'offered orders/s',
      'achieved PAID/s',
      'paid',
      'PAID p50 ms',
      'p95',
      'p99',
      'receipt p50 ms',
      'p95',
      'p99',
      'kept up',
    ],
    rows,
  );
}

/** Where an order's latency goes, hop by hop, per step: p50 / p95 ms (hops.ts). */
function hopsSection(result: EndToEndResult): string[] {
  const steps = result.steps.filter((s) => s.hops);
  if (steps.length === 0) return [];
  const rows = HOPS.map((hop) => [hop, ...steps.map((s) => `${int(s.hops![hop].p50)} / ${int(s.hops![hop].p95)}`)]);
  return [
    "**Where the latency goes** — each hop's p50 / p95 ms, from the timestamps the services write (order, outbox rows written and published, inbox records, PAID, receipt sent)",
    '',
    table(['hop', ...steps.map((s) => `${s.offered} orders/s`)], rows),
    '',
  ];
}

/** A share of one core (1 = a whole core) as a percentage. */
const ofACore = (core: number | undefined) => `${((core ?? 0) * 100).toFixed(1)}%`;

function idleSection({ idle }: EndToEndResult): string[] {
  if (!idle) return [];
  const rows = Object.keys(idle.atRest).map((part) => [
    part,
    ofACore(idle.atRest[part]),
    ofACore(idle.atOnePerSecond[part]),
  ]);
  return [
    `**With almost no work** — CPU of each process as a share of one core, over ${idle.seconds} s each, after the warm-up`,
    '',
    table(['process', 'at rest', 'at 1 order/s'], rows),
    '',
  ];
}

function endToEndCpuTable(result: EndToEndResult): string {
  const parts = Object.keys(result.steps[0]?.cpuMsPerOrder ?? {});
  const rows = result.steps.map((s) => [
    String(s.offered),
    `${Math.round(s.cpuUtilisation * 100)}%`,
    ...parts.map((part) => (s.cpuMsPerOrder[part] ?? 0).toFixed(1)),
    Object.values(s.cpuMsPerOrder)
      .reduce((sum, ms) => sum + ms, 0)
      .toFixed(1),
  ]);
  return table(['offered orders/s', 'CPU busy', ...parts, 'total'], rows);
}

/** End to end, this run against an earlier one: CPU per order by process and PAID p95, at the loads both offered. */
export function beforeAfterTable(before: BenchRun, after: EndToEndResult): string | undefined {
  const earlier = new Map((before.endToEnd?.steps ?? []).map((step) => [step.offered, step]));
  const both = after.steps.filter((step) => earlier.has(step.offered));
  if (both.length === 0) return undefined;
  const parts = Object.keys(both[0]!.cpuMsPerOrder);
  const total = (cpu: Record<string, number>) => Object.values(cpu).reduce((sum, ms) => sum + ms, 0);
  const change = (was: number | undefined, is: number | undefined, digits = 1) =>
    was === undefined || is === undefined ? '–' : `${was.toFixed(digits)} → ${is.toFixed(digits)}`;
  const rows = both.map((step) => {
    const was = earlier.get(step.offered)!;
    return [
      String(step.offered),
      ...parts.map((part) => change(was.cpuMsPerOrder[part], step.cpuMsPerOrder[part])),
      change(total(was.cpuMsPerOrder), total(step.cpuMsPerOrder)),
      change(was.paidMs.p95 / 1000, step.paidMs.p95 / 1000),
      `${was.keptUp ? 'yes' : 'no'} → ${step.keptUp ? 'yes' : 'no'}`,
    ];
  });
  return table(['offered orders/s', ...parts, 'total CPU ms/order', 'PAID p95 s', 'kept up'], rows);
}

function growthTable(samples: readonly GrowthSample[]): string {
  const rows = samples.map((s) => [
    s.purgeBy === 'drop' ? 'partitions dropped' : 'rows deleted',
    s.rows.toLocaleString('en'),
    s.retention === 'off' ? 'off' : 'purging older half',
    s.p50Ms.toFixed(2),
    s.p99Ms.toFixed(2),
    int(s.insertsPerSecond),
    mb(s.tableBytes),
    mb(s.keyIndexBytes),
    mb(s.ageIndexBytes),
    s.retention === 'off' ? int((s.tableBytes + s.keyIndexBytes + s.ageIndexBytes) / s.rows) : '–',
    s.purged ? `${s.purged.toLocaleString('en')} in ${s.purgeSeconds} s` : '–',
  ]);
  return table(
    [
      'purged by',
      'rows',
      'retention',
      'insert p50 ms',
      'p99 ms',
      'inserts/s',
      'table MB',
      'key index MB',
      'processed_at index MB',
      'bytes/row',
      'purged',
    ],
    rows,
  );
}

/** docs/benchmarks.md: the latest run's tables, its machine and its targets. */
export function formatMarkdown(
  run: BenchRun,
  targets: readonly Target[],
  chartPath?: string,
  before?: BenchRun,
): string {
  const parts = [
    '# Benchmarks',
    '',
    `Generated by \`pnpm bench${run.quick ? ' --quick' : ''}\` on ${run.startedAt.slice(0, 10)} (${run.startedAt} → ${run.finishedAt}); rerun it to replace this page. ` +
      'Every number is a median of the repetitions; variants ran interleaved (repetition → concurrency → variant) on a fresh database after a warm-up round.',
    '',
    '## Machine',
    '',
    table(
      ['', ''],
      Object.entries(run.machine).map(([key, value]) => [key, value]),
    ),
    '',
    '## Targets',
    '',
    '```',
    formatTargets(targets),
    '```',
  ];
  if (run.consumerCost?.length) {
    parts.push(
      '',
      '## 1. Consumer cost',
      '',
      'The same business change — record `(consumer, message_id)`, decrement one of 1,000 stock rows — through:',
      '',
      ...Object.entries(CONSUMER_VARIANTS).map(([key, text]) => `- (${key}) ${text}`),
      '',
      consumerTables(run.consumerCost),
    );
  }
  if (run.relay?.length) {
    parts.push(
      '',
      '## 2. Relay',
      '',
      'Outbox rows of `orders.order-placed.v1` (fan-out 2) into BullMQ, batches of 100.',
      '',
      relayTable(run.relay),
    );
  }
  if (run.endToEnd) {
    parts.push(
      '',
      '## 3. End to end',
      '',
      `Open-loop load through the running system (four services, Stripe simulator, SMTP sink, one instance each), warmed up first by 10 s of the lightest load (not recorded); latency from sending \`POST /orders\` to the PAID status change and to the receipt accepted by SMTP. ${
        run.endToEnd.deployed
          ? "The services run as their images run them: built, deployed with their production dependencies, started with the image's command and `NODE_ENV=production`."
          : 'The services ran from their sources, through tsx.'
      }`,
      '',
      endToEndTable(run.endToEnd),
      '',
      ...hopsSection(run.endToEnd),
      '**Where the CPU goes** — ms of CPU per order by process, and how busy all cores were during the step',
      '',
      endToEndCpuTable(run.endToEnd),
      '',
      ...idleSection(run.endToEnd),
      run.endToEnd.knee === undefined
        ? 'Knee: not found (even the lightest step was not flat).'
        : `Knee: **${run.endToEnd.knee} orders/s** — the highest offered load that kept up with p95 within twice the lightest step's.`,
      ...(chartPath ? ['', `![latency against offered load](${chartPath})`] : []),
    );
    const compared = before && beforeAfterTable(before, run.endToEnd);
    if (compared) {
      parts.push(
        '',
        `**Before and after** — against the previous run in benchmarks/runs (${before!.startedAt.slice(0, 16).replace('T', ' ')}): CPU ms per order by process, PAID p95`,
        '',
        compared,
      );
    }
  }
  if (run.growth?.length) {
    parts.push(
      '',
      '## 4. Growth of processed_messages',
      '',
      'Single-record inserts, 8 at a time, at each table size; then the same while `createInboxRetention().purge()` removes the older half: with UUID v4 ids every record is in the DEFAULT partition and goes in DELETE batches of 1,000 (the table as it was before partitions), with UUID v7 ids the records are in partitions of a day and the expired ones go with their partition. Sizes (every partition included) are read right after, before any vacuum: deleted index entries free their pages for reuse, they do not shrink the index.',
      '',
      growthTable(run.growth),
    );
  }
  if (run.profile) {
    parts.push(
      '',
      '## 5. Where the CPU of an order goes',
      '',
      `Every process under \`node --cpu-prof\` (\`pnpm bench:profile\`), ${run.profile.offered} orders/s after a warm-up; the samples taken while the load ran are charged to what spent them — a library, an idem package, the service's own code — and time inside Node.js (sockets, streams, timers) to its nearest caller outside Node.js. Each process's CPU per order is read from /proc (a profile's sample intervals are wall time, which on busy cores overstates CPU) and split by the profile's shares; profiling itself adds to it, so the totals run above section 3's at the same load. See [performance.md](performance.md) for what it means.`,
      '',
      profileTables(run.profile),
    );
  }
  if (run.broker) {
    parts.push(
      '',
      '## 6. The broker: one Redis against a Redis Cluster',
      '',
      "The whole system at the same offered load on one redis-server and on a Redis Cluster of three masters with a replica each (all the bench's own, on this machine): each node's CPU per placed order from /proc. One Redis runs its commands on one core, so the busiest node bounds the orders per second the broker can take: about 1,000 ms ÷ its CPU ms per order, with a core each. Then the relay as the services run it, on the cluster, with each durability level (`RELAY_DURABILITY`): `replica` waits for a replica of every master written (WAIT); `disk` needs Redis 7.2 (WAITAOF).",
      '',
      brokerTables(run.broker),
    );
  }
  if (run.emailDrain) {
    const { emails, connections, samples } = run.emailDrain;
    parts.push(
      '',
      '## 7. A backlog of e-mails',
      '',
      `${emails.toLocaleString('en')} e-mails due at once, as an outage leaves them (oldest first, nothing notifies), drained by one dispatcher with the service's defaults (${connections} SMTP connections, LISTEN, its poll) into the SMTP sink in its own process: from the dispatcher's start until the last is marked sent. At 20 orders/s the system makes 40 e-mails a second; a backlog drains at what the dispatcher sends beyond that.`,
      '',
      table(
        ['repetition', 'seconds', 'e-mails/s'],
        samples.map((sample, i) => [`${i + 1}`, sample.seconds.toFixed(1), int(sample.perSecond)]),
      ),
    );
  }
  return parts.join('\n') + '\n';
}

function brokerTables({ loads, durability, bareDelivery, transports }: BrokerResult): string {
  const rows = loads.map((load) => {
    const masters = load.nodes.filter((n) => n.role === 'master').map((n) => n.cpuMsPerOrder);
    const replicas = load.nodes.filter((n) => n.role === 'replica').map((n) => n.cpuMsPerOrder);
    const busiest = Math.max(...masters);
    return [
      load.redis,
      `${load.offered}`,
      `${load.paid} / ${load.placed}`,
      masters.map((ms) => ms.toFixed(2)).join(' / '),
      replicas.length ? replicas.map((ms) => ms.toFixed(2)).join(' / ') : '–',
      busiest > 0 ? int(1000 / busiest) : '–',
    ];
  });
  const levels = durability.map((d) => [d.durability, int(d.rowsPerSecond), `${d.repetitions}`]);
  return [
    table(
      [
        'Redis',
        'orders/s offered',
        'paid / placed',
        'CPU ms per order, each master',
        'each replica',
        'orders/s its busiest master could take',
      ],
      rows,
    ),
    '',
    table(['relay durability', 'rows/s (median)', 'repetitions'], levels),
    ...(bareDelivery ? ['', bareDeliveryLine(bareDelivery)] : []),
    ...(transports?.length
      ? [
          '',
          "**A bare delivery on each transport**, side by side (infra/bench/src/transports.ts): published in batches of 100 (BullMQ `addBulk` on the one node; RabbitMQ on a confirm channel to a quorum queue, the machine's server), taken at concurrency 8 by a handler that does nothing, and settled — as fast as it goes, nothing of idem's.",
          '',
          table(
            ['transport', 'deliveries', 'deliveries/s', "client's CPU µs a delivery", "broker's CPU µs a delivery"],
            transports.map((t) => [t.transport, int(t.deliveries), int(t.perSecond), int(t.clientUs), int(t.brokerUs)]),
          ),
        ]
      : []),
  ].join('\n');
}

/** What BullMQ alone costs a delivery, and so an order: a floor under the CPU target. */
function bareDeliveryLine(bare: BareDelivery): string {
  return (
    `**A bare delivery** — BullMQ alone on the one node: a job added, fetched by a worker at concurrency ${bare.concurrency}, ` +
    `handled by a function that does nothing and completed, ${bare.perSecond} a second (an order's ${bare.perOrder} ` +
    `deliveries at section 6's load), ${int(bare.deliveries)} measured: ${int(bare.clientUs)} µs of the client's CPU and ` +
    `${int(bare.redisUs)} µs of Redis's a delivery, with ${bare.scripts} scripts and ${bare.waits} blocking waits. ` +
    `An order's ${bare.perOrder} deliveries are ${bareDeliveryMs(bare).toFixed(1)} ms of CPU before any service does its work.`
  );
}

/** CPU ms of an order's deliveries through BullMQ alone, the client's and Redis's. */
const bareDeliveryMs = (bare: BareDelivery) => ((bare.clientUs + bare.redisUs) * bare.perOrder) / 1000;

/** Requests per order, then CPU ms per order by process and by what spent it (the largest first). */
function profileTables(profile: EndToEndProfile): string {
  const processes = Object.keys(profile.processes).sort(
    (a, b) => profile.processes[b]!.totalMsPerOrder - profile.processes[a]!.totalMsPerOrder,
  );
  const totals = new Map<string, number>();
  for (const name of processes) {
    for (const [owner, ms] of Object.entries(profile.processes[name]!.msPerOrder)) {
      totals.set(owner, (totals.get(owner) ?? 0) + ms);
    }
  }
  const owners = [...totals].sort((a, b) => b[1] - a[1]);
  const shown = owners.filter(([, ms]) => ms >= 0.3);
  const rest = owners.filter(([, ms]) => ms < 0.3);
  const cell = (value: number | undefined) => (value ? value.toFixed(1) : '–');
  const rows = [
    ...shown.map(([owner, total]) => [
      owner,
      ...processes.map((p) => cell(profile.processes[p]!.msPerOrder[owner])),
      total.toFixed(1),
    ]),
    [
      `${rest.length} others`,
      ...processes.map((p) =>
        cell(rest.reduce((sum, [owner]) => sum + (profile.processes[p]!.msPerOrder[owner] ?? 0), 0)),
      ),
      rest.reduce((sum, [, ms]) => sum + ms, 0).toFixed(1),
    ],
    [
      '**total**',
      ...processes.map((p) => `**${profile.processes[p]!.totalMsPerOrder.toFixed(1)}**`),
      `**${owners.reduce((sum, [, ms]) => sum + ms, 0).toFixed(1)}**`,
    ],
  ];
  const services = processes.filter((p) => `PostgreSQL statements: ${p}` in profile.requestsPerOrder);
  const serviceMs = services.reduce((sum, p) => sum + profile.processes[p]!.totalMsPerOrder, 0);
  const spentBy = (...owners: string[]) =>
    services.reduce(
      (sum, p) => sum + owners.reduce((ms, owner) => ms + (profile.processes[p]!.msPerOrder[owner] ?? 0), 0),
      0,
    );
  const statements = services.reduce(
    (sum, p) => sum + (profile.requestsPerOrder[`PostgreSQL statements: ${p}`] ?? 0),
    0,
  );
  const share = (ms: number) => `${Math.round((ms / serviceMs) * 100)}%`;
  const database = spentBy('Prisma', 'node-postgres');
  const summary =
    `The ${services.length} services spend ${serviceMs.toFixed(1)} ms of CPU per order: ${share(database)} in Prisma and node-postgres ` +
    `for ${statements.toFixed(0)} statements (${(database / statements).toFixed(2)} ms each), ${share(spentBy('BullMQ + ioredis'))} in BullMQ and ioredis, ` +
    `${share(spentBy('pino (logging)', 'prom-client (metrics)', 'OpenTelemetry'))} in logging, metrics and tracing together, ` +
    `${share(
      services.reduce(
        (sum, p) =>
          sum +
          Object.entries(profile.processes[p]!.msPerOrder)
            .filter(([owner]) => owner.startsWith('@idem/'))
            .reduce((ms, [, v]) => ms + v, 0),
        0,
      ),
    )} in idem's own packages.`;
  return [
    summary,
    `**What an order asks for** — per order\n\n${table(
      ['', 'per order'],
      Object.entries(profile.requestsPerOrder).map(([what, count]) => [what, String(count)]),
    )}`,
    `**CPU ms per order** by process and by what spent it\n\n${table(['spent in', ...processes, 'all'], rows)}`,
  ].join('\n\n');
}

/** An SVG line chart of POST→PAID and POST→receipt latency against offered load. */
export function formatChart(result: EndToEndResult): string {
  const width = 720;
  const height = 400;
  const margin = { left: 70, right: 170, top: 30, bottom: 50 };
  const steps = result.steps;
  const series = [
    { label: 'PAID p50', color: '#1b9e77', values: steps.map((s) => s.paidMs.p50) },
    { label: 'PAID p95', color: '#d95f02', values: steps.map((s) => s.paidMs.p95) },
    { label: 'PAID p99', color: '#7570b3', values: steps.map((s) => s.paidMs.p99) },
    { label: 'receipt p95', color: '#e7298a', values: steps.map((s) => s.receiptMs.p95), dashed: true },
  ];
  // Logarithmic: the flat part (hundreds of ms) and the saturated part (tens of seconds) both stay readable.
  const values = series.flatMap((s) => s.values).filter((v) => v > 0);
  const low = Math.floor(Math.log10(Math.max(1, Math.min(...values, 100))));
  const high = Math.max(low + 1, Math.ceil(Math.log10(Math.max(10, ...values))));
  const plotW = width - margin.left - margin.right;
  const plotH = height - margin.top - margin.bottom;
  const x = (i: number) => margin.left + (steps.length === 1 ? plotW / 2 : (i * plotW) / (steps.length - 1));
  const y = (v: number) => margin.top + plotH - ((Math.log10(Math.max(v, 10 ** low)) - low) / (high - low)) * plotH;
  const ticks = Array.from({ length: high - low + 1 }, (_, i) => 10 ** (low + i));
  const lines = series.map(
    (s) =>
      `<polyline fill="none" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 4"' : ''} points="${s.values
        .map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`)
        .join(' ')}"/>` +
      s.values
        .map((v, i) => `<circle cx="${x(i).toFixed(1)}" cy="${y(v).toFixed(1)}" r="3" fill="${s.color}"/>`)
        .join(''),
  );
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${width}" height="${height}" fill="white"/>`,
    `<text x="${margin.left}" y="18" font-size="14">idem end to end: latency against offered load</text>`,
    ...ticks.map(
      (t) =>
        `<line x1="${margin.left}" x2="${margin.left + plotW}" y1="${y(t).toFixed(1)}" y2="${y(t).toFixed(1)}" stroke="#ddd"/>` +
        `<text x="${margin.left - 8}" y="${(y(t) + 4).toFixed(1)}" text-anchor="end">${t.toLocaleString('en')}</text>`,
    ),
    ...steps.map(
      (s, i) =>
        `<text x="${x(i).toFixed(1)}" y="${height - margin.bottom + 18}" text-anchor="middle">${s.offered}${s.keptUp ? '' : '*'}</text>`,
    ),
    `<text x="${margin.left + plotW / 2}" y="${height - 10}" text-anchor="middle">offered orders/s (* = saturated)</text>`,
    `<text transform="translate(16 ${margin.top + plotH / 2}) rotate(-90)" text-anchor="middle">latency ms (log scale)</text>`,
    ...lines,
    ...series.map(
      (s, i) =>
        `<line x1="${width - margin.right + 20}" x2="${width - margin.right + 44}" y1="${margin.top + 10 + i * 20}" y2="${margin.top + 10 + i * 20}" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 4"' : ''}/>` +
        `<text x="${width - margin.right + 50}" y="${margin.top + 14 + i * 20}">${s.label}</text>`,
    ),
    '</svg>',
  ].join('\n');
}
