import { describe, expect, it, vi } from 'vitest';
import { compareRuns } from './compare.js';
import type { ConsumerSample } from './consumer-cost.js';
import { kneeOf, type LoadStep } from './end-to-end.js';
import {
  beforeAfterTable,
  evaluateTargets,
  formatChart,
  formatMarkdown,
  formatTargets,
  type BenchRun,
} from './report.js';
import { atRate, median, percentile } from './stats.js';

const cpu = { bench: 0, postgres: 0, redis: 0 };
const sample = (
  variant: ConsumerSample['variant'],
  mode: ConsumerSample['mode'],
  concurrency: number,
  perSecond: number,
) =>
  ({
    variant,
    mode,
    concurrency,
    repetition: 1,
    messages: 100,
    seconds: 100 / perSecond,
    perSecond,
    cpu,
  }) as ConsumerSample;

const run = (consumerCost: ConsumerSample[]): BenchRun => ({
  startedAt: '2026-11-30T00:00:00.000Z',
  finishedAt: '2026-11-30T00:10:00.000Z',
  quick: false,
  machine: {},
  settings: {},
  consumerCost,
});

const step = (offered: number, p95: number, keptUp = true): LoadStep => ({
  offered,
  seconds: 30,
  placed: offered * 30,
  paid: offered * 30,
  receipts: offered * 30,
  achieved: offered,
  paidMs: { p50: p95 / 2, p95, p99: p95 * 1.2 },
  receiptMs: { p50: p95, p95: p95 * 2, p99: p95 * 3 },
  keptUp,
  cpuMsPerOrder: { orders: 1 },
  cpuUtilisation: 0.5,
});

describe('bench statistics', () => {
  it('takes the median of the repetitions and nearest-rank percentiles', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 95)).toBe(10);
    expect(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 50)).toBe(5);
    expect(percentile([], 99)).toBe(0);
  });

  it('starts each of an open loop at its time, without waiting for the ones before to finish', async () => {
    const started: number[] = [];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const all = atRate(3, 1000, async (i) => {
      started.push(i);
      await gate;
      return i * 10;
    });
    await vi.waitFor(() => expect(started).toEqual([0, 1, 2]));
    release();
    expect(await all).toEqual([0, 10, 20]);
  });

  it('finds the knee: the last step that kept up with p95 within twice the lightest step', () => {
    expect(kneeOf([step(10, 400), step(25, 500), step(50, 900), step(100, 5000, false)])).toBe(25);
    expect(kneeOf([step(10, 400), step(25, 600, false)])).toBe(10);
    expect(kneeOf([])).toBeUndefined();
  });

  it('judges each target on the medians, per concurrency', () => {
    const targets = evaluateTargets(
      run([
        ...[900, 1000, 1100].map((r) => ({ ...sample('a', 'first', 8, r), latency: { p50: 5, p99: 9 } })),
        sample('s', 'first', 8, 800),
        sample('a', 'duplicate', 8, 2500),
        sample('c', 'first', 8, 1050),
        sample('e', 'first', 8, 400),
      ]),
    );
    const byName = Object.fromEntries(targets.map((t) => [t.name, t]));
    expect(byName['(a) ≥ 1.0 × (c), first deliveries, concurrency 8']).toMatchObject({
      pass: false,
      measured: '0.95× (latency to settlement p50 5.0 ms, p99 9.0 ms)',
    });
    expect(
      byName['group commit is the better default: (a) ≥ 1.0 × (s), first deliveries, concurrency 8'],
    ).toMatchObject({ pass: true, measured: '1.25×' });
    expect(byName['(a) ≥ 2 × (e) at concurrency 8, first deliveries']).toMatchObject({ pass: true, measured: '2.50×' });
    expect(byName['duplicates through (a) ≥ 2× cheaper than first deliveries, concurrency 8']).toMatchObject({
      pass: true,
    });
    // One delivery in flight is never batched: no target at concurrency 1.
    expect(evaluateTargets(run([sample('a', 'first', 1, 500), sample('c', 'first', 1, 1000)]))).toEqual([]);
  });

  it('judges the journal on CPU per delivery, each repetition of (j) beside the same repetition of (a)', () => {
    // The machine slows down between repetitions: rates swing, a delivery's cost does not.
    const measured = (variant: 'a' | 'j', repetition: number, perSecond: number, bench: number) => ({
      ...sample(variant, 'first', 8, perSecond),
      repetition,
      cpu: { bench, postgres: 0.2, redis: variant === 'j' ? 0.03 : 0.01 },
    });
    const name =
      'the delivery journal costs ≤ 5%: CPU per first delivery, (a) ≥ 0.95 × (j), paired by repetition, concurrency 8';
    const journal = (cost: ConsumerSample[]) => evaluateTargets(run(cost)).find((t) => t.name === name);
    expect(
      journal([
        measured('a', 1, 1000, 0.5),
        measured('j', 1, 980, 0.5),
        measured('a', 2, 700, 0.5),
        measured('j', 2, 690, 0.5),
      ]),
    ).toMatchObject({ pass: true, measured: '0.97× (rates, paired: (j) 0.98 × (a))' });
    // A journal that doubles what a delivery costs the bench fails, whatever the rates say.
    expect(journal([measured('a', 1, 1000, 0.5), measured('j', 1, 600, 1)])).toMatchObject({ pass: false });
  });

  it('judges the end-to-end knee, the CPU and memory at 20 orders/s, the latency at 10 orders/s and the CPU per order at the knee', () => {
    const at20 = {
      ...step(20, 500),
      cpuMsPerOrder: { orders: 30, postgres: 25 },
      rssMb: { orders: 120, 'payments-2': 151, 'stripe-sim': 400 },
    };
    const endToEnd = { steps: [step(10, 400), at20, step(60, 5000, false)], knee: 20 };
    expect(evaluateTargets({ ...run([]), endToEnd })).toEqual([
      { name: 'end to end: knee ≥ 30 orders/s', measured: '20', pass: false },
      { name: 'end to end: ≤ 50 ms of CPU per order at 20 orders/s, all processes', measured: '55.0 ms', pass: false },
      {
        name: 'end to end: ≤ 150 MB resident per service process at 20 orders/s',
        measured: 'orders 120, payments-2 151', // the simulators are not the system's
        pass: false,
      },
      { name: 'end to end at 10 orders/s: POST→PAID p50 ≤ 150 ms', measured: '200 ms', pass: false },
      { name: 'end to end at 10 orders/s: POST→PAID p95 ≤ 400 ms', measured: '400 ms', pass: true },
      { name: 'end to end at 10 orders/s: POST→receipt p95 ≤ 600 ms', measured: '800 ms', pass: false },
      {
        name: 'end to end (the compass goal): ≤ 30 ms of CPU per order at the knee, all processes',
        measured: '55.0 ms at 20 orders/s',
        pass: false,
      },
    ]);
  });

  it('judges each process at rest against 1% of a core, naming the busiest, the load generator aside', () => {
    const idle = (orders: number) => ({
      seconds: 20,
      atRest: { orders, redis: 0.004, 'load generator': 0.5 },
      atOnePerSecond: { orders: 0.03, redis: 0.01, 'load generator': 0.5 },
    });
    const judged = (orders: number) =>
      evaluateTargets({ ...run([]), endToEnd: { steps: [step(20, 500)], idle: idle(orders) } }).find((t) =>
        t.name.includes('at rest'),
      );
    expect(judged(0.008)).toEqual({
      name: 'end to end: ≤ 1% of a core per process with the system at rest',
      measured: 'busiest orders 0.8% (at 1 order/s: 3.0%)',
      pass: true,
    });
    expect(judged(0.02)?.pass).toBe(false);
  });

  it("says beside the CPU target what an order's deliveries cost through BullMQ alone, from section 6", () => {
    const endToEnd = { steps: [step(10, 400), { ...step(20, 500), cpuMsPerOrder: { orders: 55 } }], knee: 20 };
    const bareDelivery = {
      deliveries: 2800,
      perOrder: 7,
      perSecond: 140,
      concurrency: 8,
      clientUs: 2000,
      redisUs: 1000,
      scripts: 5,
      waits: 2,
    };
    const withBroker = { ...run([]), endToEnd, broker: { loads: [], durability: [], bareDelivery } };
    expect(evaluateTargets(withBroker)).toContainEqual({
      name: 'end to end: ≤ 50 ms of CPU per order at 20 orders/s, all processes',
      measured: '55.0 ms; BullMQ alone, 7 bare deliveries: 21.0 ms',
      pass: false,
    });
    expect(formatMarkdown(withBroker, evaluateTargets(withBroker))).toContain(
      "2,000 µs of the client's CPU and 1,000 µs of Redis's a delivery, with 5 scripts and 2 blocking waits. An order's 7 deliveries are 21.0 ms of CPU",
    );
  });

  it('compares end-to-end steps with an earlier run at the loads both offered', () => {
    const before = { ...run([]), endToEnd: { steps: [step(10, 400), step(20, 1400)] } };
    const rendered = beforeAfterTable(before, { steps: [step(20, 600), step(40, 900)] })!;
    expect(rendered.split('\n')).toHaveLength(3); // header, rule, the one load both runs offered
    expect(rendered).toContain('| 20 | 1.0 → 1.0 | 1.0 → 1.0 | 1.4 → 0.6 | yes → yes |');
    expect(beforeAfterTable(run([]), { steps: [step(20, 600)] })).toBeUndefined();
  });

  it('draws one line per latency series and marks saturated steps', () => {
    const svg = formatChart({ steps: [step(10, 400), step(25, 500), step(50, 3000, false)], knee: 25 });
    expect(svg.match(/<polyline /g)).toHaveLength(4);
    expect(svg).toContain('>50*</text>');
  });

  it('compares two runs target by target, with the ratio of their figures', () => {
    const before = { ...run([]), endToEnd: { steps: [step(10, 400), step(20, 1000)], knee: 10 } };
    const after = { ...run([]), endToEnd: { steps: [step(10, 200), step(20, 300)], knee: 20 } };
    before.endToEnd.steps[0] = {
      ...before.endToEnd.steps[0]!,
      hops: { 'orders relay': { p50: 27, p95: 158 } } as never,
    };
    after.endToEnd.steps[0] = { ...after.endToEnd.steps[0]!, hops: { 'orders relay': { p50: 10, p95: 30 } } as never };
    const lines = compareRuns('main', before, after).split('\n');
    expect(lines).toContain('MISS  end to end: knee ≥ 30 orders/s: 10 → 20  (2.00×)');
    expect(lines).toContain('PASS  end to end at 10 orders/s: POST→PAID p95 ≤ 400 ms: 400 ms → 200 ms  (0.50×)');
    expect(lines.slice(-2)).toEqual([
      'each hop at 10 orders/s, p50 / p95 ms, before → after:',
      '  orders relay: 27 / 158 → 10 / 30',
    ]);
  });

  it('says when the two runs started the services differently', () => {
    const from = (deployed: boolean) => ({ ...run([]), endToEnd: { deployed, steps: [step(10, 400)], knee: 10 } });
    expect(compareRuns('main', from(true), from(true))).not.toContain('not alike');
    expect(compareRuns('main', from(false), from(true)).split('\n')[1]).toBe(
      'not alike: end to end ran the services from their sources before and as their images run them after',
    );
  });
});

describe('the e-mail backlog figure', () => {
  const drained = (perSecond: number): BenchRun => ({
    ...run([]),
    emailDrain: {
      emails: 3_000,
      connections: 5,
      samples: [{ emails: 3_000, seconds: 3_000 / perSecond, perSecond }],
      perSecond,
    },
  });

  it('passes at 100 e-mails a second or more and misses below, with the rate it measured', () => {
    expect(formatTargets(evaluateTargets(drained(140)))).toBe(
      'PASS  a backlog of 3,000 e-mails drains at ≥ 100 e-mails/s against the SMTP sink (5 connections): 140 e-mails/s',
    );
    expect(formatTargets(evaluateTargets(drained(10)))).toMatch(/^MISS .*: 10 e-mails\/s$/);
  });

  it('has its section on the page, a row per repetition', () => {
    expect(formatMarkdown(drained(140), [])).toContain('## 7. A backlog of e-mails');
    expect(formatMarkdown(drained(140), [])).toMatch(/\| 1 +\| 21\.4 +\| 140 +\|/);
  });
});
