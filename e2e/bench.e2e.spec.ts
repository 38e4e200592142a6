import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { BenchRun, Target } from '@idem/bench';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * CI smoke of `pnpm bench --quick`: the harness runs every section end to end and writes its
 * results. It asserts what was measured and written, never how fast anything was.
 */
const root = fileURLToPath(new URL('..', import.meta.url));
let out: string;
afterAll(() => rm(out, { recursive: true, force: true }));

describe('pnpm bench --quick', () => {
  it(
    'measures all four sections and writes the JSON, the Markdown tables and the chart',
    { timeout: 240_000 },
    async () => {
      out = await mkdtemp(join(tmpdir(), 'idem-bench-'));
      // The same entry point `pnpm bench` runs.
      const { stdout } = await promisify(execFile)(
        process.execPath,
        ['--conditions=development', '--import', 'tsx', 'infra/bench/src/main.ts', '--quick', '--out', out],
        { cwd: root, maxBuffer: 16 * 1024 * 1024 },
      );
      expect(stdout).toMatch(/Targets\n(PASS|MISS) {2}/);

      const [runFile] = await readdir(join(out, 'benchmarks', 'runs'));
      const run = JSON.parse(await readFile(join(out, 'benchmarks', 'runs', runFile!), 'utf8')) as BenchRun & {
        targets: Target[];
      };
      expect(run.quick).toBe(true);
      for (const variant of ['a', 'b', 'c', 'e']) {
        for (const mode of ['first', 'duplicate']) {
          const samples = run.consumerCost!.filter((s) => s.variant === variant && s.mode === mode);
          expect(samples.length, `(${variant}) ${mode}`).toBeGreaterThan(0);
          for (const sample of samples) expect(sample.perSecond).toBeGreaterThan(0);
        }
      }
      expect(new Set(run.relay!.map((s) => s.variant))).toEqual(new Set(['relay', 'addBulk']));
      expect(run.endToEnd!.steps[0]!.paid).toBeGreaterThan(0);
      expect(run.growth!.map((s) => s.retention)).toContain('purging');
      expect(run.targets.map((t) => t.name)).toEqual(
        expect.arrayContaining([
          expect.stringContaining('(a) ≥ 0.9 × (c)'),
          expect.stringContaining('(a) ≥ 2 × (e)'),
          expect.stringContaining('duplicates through (a)'),
          expect.stringContaining('relay ≥ 0.5'),
        ]),
      );

      const markdown = await readFile(join(out, 'benchmarks.md'), 'utf8');
      for (const heading of [
        '## Machine',
        '## Targets',
        '## 1. Consumer cost',
        '## 2. Relay',
        '## 3. End to end',
        '## 4. Growth',
      ]) {
        expect(markdown).toContain(heading);
      }
      const chart = await readFile(join(out, 'benchmarks', 'end-to-end.svg'), 'utf8');
      expect(chart).toMatch(/^<svg [^>]*>[\s\S]*<polyline [\s\S]*<\/svg>\n$/);
    },
  );
});
