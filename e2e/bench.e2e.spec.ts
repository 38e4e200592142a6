import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { BenchRun, Target } from '@idem/bench';
import { createPostgresServer } from '@idem/testkit';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * CI smoke of `pnpm bench --quick`: the harness runs every section end to end and writes its
 * results. It asserts what was measured and written, never how fast anything was.
 */
const root = fileURLToPath(new URL('..', import.meta.url));
const outs: string[] = [];
afterAll(() => Promise.all(outs.map((out) => rm(out, { recursive: true, force: true }))));

type Run = BenchRun & { targets: Target[] };

/** Runs the same entry point `pnpm bench` runs; returns its output directory, stdout and run. */
async function bench(args: string[], env: Record<string, string> = {}) {
  const out = await mkdtemp(join(tmpdir(), 'idem-bench-'));
  outs.push(out);
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--conditions=development', '--import', 'tsx', 'infra/bench/src/main.ts', '--quick', '--out', out, ...args],
    { cwd: root, maxBuffer: 16 * 1024 * 1024, env: { ...process.env, ...env } },
  );
  const [runFile] = await readdir(join(out, 'benchmarks', 'runs'));
  const run = JSON.parse(await readFile(join(out, 'benchmarks', 'runs', runFile!), 'utf8')) as Run;
  return { out, stdout, run };
}

const variantsOf = (run: Run) => new Set(run.consumerCost!.map((s) => s.variant));
const logical = (run: Run) => /wal_level=logical/.test(run.machine.PostgreSQL ?? '');

describe('pnpm bench --quick', () => {
  it(
    'measures all six sections and writes the JSON, the Markdown tables and the chart',
    { timeout: 360_000 },
    async () => {
      const { out, stdout, run } = await bench([]);
      expect(stdout).toMatch(/Targets\n(PASS|MISS) {2}/);
      expect(run.quick).toBe(true);
      // Whatever wal_level the machine's server has: (f) runs where it is logical and is
      // left out with a reason where it is not (a default server).
      if (logical(run)) expect(variantsOf(run)).toContain('f');
      else {
        expect(stdout).toContain('wal_level is not logical: variant (f)');
        expect(variantsOf(run)).not.toContain('f');
      }
      for (const variant of ['a', 's', 'j', 'b', 'c', 'e']) {
        for (const mode of ['first', 'duplicate']) {
          const samples = run.consumerCost!.filter((s) => s.variant === variant && s.mode === mode);
          expect(samples.length, `(${variant}) ${mode}`).toBeGreaterThan(0);
          for (const sample of samples) expect(sample.perSecond).toBeGreaterThan(0);
        }
      }
      expect(new Set(run.relay!.map((s) => s.variant))).toEqual(new Set(['relay', 'relays', 'addBulk']));
      expect(run.endToEnd!.deployed).toBe(true); // the services as their images run them
      expect(run.endToEnd!.steps[0]!.paid).toBeGreaterThan(0);
      // Every hop from POST to PAID and the receipt, timed from what the services wrote.
      const hops = Object.values(run.endToEnd!.steps[0]!.hops!);
      expect(hops).toHaveLength(9);
      for (const hop of hops) expect(hop.p95).toBeGreaterThanOrEqual(hop.p50);
      expect(run.growth!.map((s) => s.retention)).toContain('purging');
      expect(new Set(run.growth!.map((s) => s.purgeBy))).toEqual(new Set(['delete', 'drop']));
      // One Redis and a cluster of three masters with a replica each, each node's CPU per order.
      const [one, cluster] = run.broker!.loads;
      expect([one!.redis, one!.nodes.length, cluster!.redis, cluster!.nodes.length]).toEqual([
        'one node',
        1,
        'cluster',
        6,
      ]);
      for (const load of run.broker!.loads) expect(load.paid).toBeGreaterThan(0);
      expect(run.broker!.durability.map((d) => d.durability)).toEqual(['none', 'replica']);
      for (const level of run.broker!.durability) expect(level.rowsPerSecond).toBeGreaterThan(0);
      // BullMQ alone: every delivery added, fetched and completed (scripts), waited for, and paid for.
      const bare = run.broker!.bareDelivery!;
      expect(bare.scripts).toBeGreaterThanOrEqual(3);
      expect(bare.waits).toBeGreaterThan(0);
      expect([bare.clientUs, bare.redisUs].every((us) => us > 0)).toBe(true);
      // The profile charges each service's samples, and counts what an order asks of PostgreSQL.
      for (const service of ['orders', 'inventory', 'payments', 'notifications']) {
        expect(run.endToEnd!.steps[0]!.rssMb![service], `${service}'s resident memory`).toBeGreaterThan(0);
        expect(run.profile!.processes[service]!.totalMsPerOrder).toBeGreaterThan(0);
        expect(run.profile!.requestsPerOrder[`PostgreSQL statements: ${service}`]).toBeGreaterThan(0);
        expect(run.profile!.requestsPerOrder[`Redis scripts: ${service}`]).toBeGreaterThan(0);
      }
      expect(run.targets.map((t) => t.name)).toEqual(
        expect.arrayContaining([
          expect.stringContaining('(a) ≥ 1.0 × (c)'),
          expect.stringContaining('group commit is the better default'),
          expect.stringContaining('the delivery journal costs ≤ 5%'),
          expect.stringContaining('(a) ≥ 2 × (e)'),
          expect.stringContaining('duplicates through (a)'),
          expect.stringContaining("one relay at the services' defaults ≥ 0.8"),
          expect.stringContaining('relays side by side ≥ 0.7'),
          expect.stringContaining('end to end at 10 orders/s: POST→PAID p50 ≤ 150 ms'),
          expect.stringContaining('end to end at 10 orders/s: POST→receipt p95 ≤ 600 ms'),
          expect.stringContaining('end to end: knee ≥ 30 orders/s'),
          // A quick run profiles a light load (5 orders/s): the statements' target there.
          expect.stringContaining('round trips: ≤ 35 PostgreSQL statements per order'),
        ]),
      );

      const markdown = await readFile(join(out, 'benchmarks.md'), 'utf8');
      for (const heading of [
        '## Machine',
        '## Targets',
        '## 1. Consumer cost',
        '## 2. Relay',
        '## 3. End to end',
        '**Where the latency goes**',
        '## 4. Growth',
        '## 5. Where the CPU of an order goes',
        '## 6. The broker: one Redis against a Redis Cluster',
      ]) {
        expect(markdown).toContain(heading);
      }
      const chart = await readFile(join(out, 'benchmarks', 'end-to-end.svg'), 'utf8');
      expect(chart).toMatch(/^<svg [^>]*>[\s\S]*<polyline [\s\S]*<\/svg>\n$/);
    },
  );

  it(
    "runs variant (f), the peer's replication listener, against a server with wal_level = logical",
    { timeout: 240_000 },
    async () => {
      // The test establishes the setting on a server of its own; the machine's stays as it is.
      const server = await createPostgresServer({ port: 15_432, settings: { wal_level: 'logical' } });
      await server.start();
      try {
        const { run } = await bench(['--only', 'consumer'], { TEST_POSTGRES_URL: server.url });
        expect(logical(run)).toBe(true);
        expect(variantsOf(run)).toContain('f');
        const f = run.consumerCost!.filter((s) => s.variant === 'f');
        expect(new Set(f.map((s) => s.mode))).toEqual(new Set(['first', 'duplicate']));
      } finally {
        await server.destroy();
      }
    },
  );
});
