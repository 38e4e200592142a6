// `pnpm bench [--quick] [--out DIR] [--only consumer,relay,e2e,growth,profile,broker,emails] [--growth-sizes N,N] [--compare REF] [--render RUN.json]`: see bench.ts and the README.
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { renderRun, runBench, SECTIONS, type Section } from './bench.js';
import { benchAt, compareRuns } from './compare.js';

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    out: { type: 'string' },
    only: { type: 'string' },
    render: { type: 'string' },
    'growth-sizes': { type: 'string' },
    compare: { type: 'string' },
  },
});
if (values.render) {
  const files = renderRun(values.render, values.out ?? 'docs');
  console.log(`rendered ${files.markdown}${files.chart ? ` and ${files.chart}` : ''} from ${values.render}`);
  process.exit(0);
}
const sections = values.only?.split(',').map((s) => s.trim()) as Section[] | undefined;
const unknown = sections?.filter((s) => !SECTIONS.includes(s));
if (unknown?.length) {
  console.error(`unknown section ${unknown.join(', ')}; choose from ${SECTIONS.join(', ')}`);
  process.exit(2);
}
// A quick run proves the harness works; it must not replace the committed results.
const out = values.out ?? (values.quick ? 'bench-results' : 'docs');
const growthSizes = values['growth-sizes']?.split(',').map(Number);
if (growthSizes?.some((n) => !Number.isInteger(n) || n <= 0)) {
  console.error(`--growth-sizes takes table sizes, e.g. 1000000,10000000`);
  process.exit(2);
}
// The same sections on the commit to compare with, first: its run is read beside this one.
const before = values.compare
  ? benchAt(
      values.compare,
      [
        ...(values.quick ? ['--quick'] : []),
        ...(values.only ? ['--only', values.only] : []),
        ...(values['growth-sizes'] ? ['--growth-sizes', values['growth-sizes']] : []),
      ],
      (line) => console.log(line),
    )
  : undefined;
const { run, files } = await runBench({ quick: values.quick, out, sections, ...(growthSizes ? { growthSizes } : {}) });
console.log(`\nwrote ${files.markdown}, ${files.json}${files.chart ? `, ${files.chart}` : ''}`);
if (before) {
  // Kept beside this run, so the comparison can be read again (and rendered: --render).
  const kept = files.json.replace(/\.json$/, `.before-${values.compare!.replace(/[^\w.-]/g, '_')}.json`);
  writeFileSync(kept, JSON.stringify(before, null, 2));
  console.log(`\n${compareRuns(values.compare!, before, run)}\n\nthe run compared with: ${kept}`);
}
process.exit(0);
