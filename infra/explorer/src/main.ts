import { parseArgs } from 'node:util';
import { explore } from './explore.js';
import { MODELS } from './models/index.js';
import { describeReport, replay, writeCounterexample } from './replay.js';

/**
 * `pnpm explore [service…] [--wrong-way NAME] [--out DIR]`: explores every order and interleaving
 * of one order's messages at each service (all of them when none is named) and checks the
 * invariants after each; a broken one is printed and written as a file under `--out`.
 * `pnpm explore --replay FILE` runs such a file again. Exits 1 when an invariant is broken.
 */
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    'wrong-way': { type: 'string' },
    replay: { type: 'string' },
    out: { type: 'string', default: 'test-results/explorer' },
  },
});

if (values.replay) {
  const { trace, broken } = await replay(values.replay);
  console.log(trace.map((step) => `  ${step}`).join('\n'));
  console.log(broken.length === 0 ? 'every invariant holds' : broken.map((b) => `✗ ${b}`).join('\n'));
  process.exit(broken.length === 0 ? 0 : 1);
}

const names = positionals.length > 0 ? positionals : Object.keys(MODELS);
let broken = 0;
for (const name of names) {
  const model = MODELS[name];
  if (!model) throw new Error(`no service named ${name}; there are ${Object.keys(MODELS).join(', ')}`);
  const wrongWay = values['wrong-way'];
  if (wrongWay && !model.wrongWays.includes(wrongWay)) continue;
  const report = await explore(model, wrongWay ? { wrongWay } : {});
  console.log(describeReport(report));
  report.counterexamples.forEach((counterexample, i) =>
    console.log(`  written: ${writeCounterexample(values.out, counterexample, i + 1)}`),
  );
  broken += report.counterexamples.length;
}
process.exit(broken === 0 ? 0 : 1);
