/**
 * `pnpm bench --compare <git ref> [--quick] [--only …]`: the same sections on `ref` — a worktree of
 * it with its own dependencies, installed offline — and then on the working tree, one after the
 * other on this machine, each target's figure side by side with the ratio, judged by today's
 * targets. A change's effect is read in one run, never across machines.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pnpm } from '@idem/testkit';
import { evaluateTargets, type BenchRun, type Target } from './report.js';

/** Runs `pnpm bench <args> --out …` on `ref` and returns the run it wrote. */
export function benchAt(ref: string, args: readonly string[], log: (line: string) => void): BenchRun {
  const dir = mkdtempSync(join(tmpdir(), 'idem-bench-compare-'));
  const tree = join(dir, 'tree');
  const git = (...gitArgs: string[]) => {
    const result = spawnSync('git', gitArgs, { stdio: 'inherit' });
    if (result.status !== 0) throw new Error(`git ${gitArgs.join(' ')} exited with ${result.status}`);
  };
  git('worktree', 'add', '--detach', tree, ref);
  try {
    log(`\n${ref}: installing its dependencies, then pnpm bench ${args.join(' ')}`);
    pnpm(tree, ['install', '--frozen-lockfile', '--offline'], process.env, 'inherit');
    pnpm(tree, ['bench', ...args, '--out', join(dir, 'out')], process.env, 'inherit');
    const runs = join(dir, 'out', 'benchmarks', 'runs');
    const [json] = readdirSync(runs).filter((name) => name.endsWith('.json'));
    return JSON.parse(readFileSync(join(runs, json!), 'utf8')) as BenchRun;
  } finally {
    git('worktree', 'remove', '--force', tree);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Each target both runs measured: before → after, and after / before of their first figures. */
export function compareRuns(ref: string, before: BenchRun, after: BenchRun): string {
  const earlier = new Map(evaluateTargets(before).map((target) => [target.name, target]));
  const lines = [`compared with ${ref}, same machine, one after the other (after / before):`];
  // Section 3 ran the services from their sources before it ran them as their images do: a
  // ratio across that change carries tsx's cost too.
  const ran = (run: BenchRun) => (run.endToEnd?.deployed ? 'as their images run them' : 'from their sources');
  if (before.endToEnd && after.endToEnd && ran(before) !== ran(after)) {
    lines.push(`not alike: end to end ran the services ${ran(before)} before and ${ran(after)} after`);
  }
  for (const target of evaluateTargets(after)) {
    const was = earlier.get(target.name);
    if (!was) continue;
    const ratio = ratioOf(was, target);
    lines.push(
      `${target.pass ? 'PASS' : 'MISS'}  ${target.name}: ${was.measured} → ${target.measured}${ratio ? `  (${ratio})` : ''}`,
    );
  }
  // Where the latency went, hop by hop, at the lightest load both runs offered.
  const lightest = after.endToEnd?.steps[0]?.offered;
  const hopsAt = (run: BenchRun) => run.endToEnd?.steps.find((step) => step.offered === lightest)?.hops;
  const [hopsBefore, hopsAfter] = [hopsAt(before), hopsAt(after)];
  if (hopsBefore && hopsAfter) {
    lines.push(`each hop at ${lightest} orders/s, p50 / p95 ms, before → after:`);
    for (const [hop, now] of Object.entries(hopsAfter)) {
      const was = hopsBefore[hop as keyof typeof hopsBefore];
      if (was) lines.push(`  ${hop}: ${was.p50} / ${was.p95} → ${now.p50} / ${now.p95}`);
    }
  }
  return lines.join('\n');
}

const firstNumber = (text: string) => Number(/-?\d[\d,]*(\.\d+)?/.exec(text)?.[0]?.replace(/,/g, '') ?? Number.NaN);

function ratioOf(before: Target, after: Target): string | undefined {
  const [was, is] = [firstNumber(before.measured), firstNumber(after.measured)];
  return Number.isFinite(was) && Number.isFinite(is) && was !== 0 ? `${(is / was).toFixed(2)}×` : undefined;
}
