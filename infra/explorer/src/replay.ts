import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { perform, type Counterexample, type Report, type Schedule } from './explore.js';
import { MODELS } from './models/index.js';
import { Scheduler } from './scheduler.js';

/** Writes a counterexample as a file `--replay` runs again; returns its path. */
export function writeCounterexample(dir: string, counterexample: Counterexample, n: number): string {
  mkdirSync(dir, { recursive: true });
  const { model, wrongWay } = counterexample.schedule;
  const path = join(dir, `${model}${wrongWay ? `-${wrongWay}` : ''}-${n}.json`);
  writeFileSync(path, `${JSON.stringify(counterexample, null, 2)}\n`);
  return path;
}

/** Runs a counterexample's schedule again, exactly: its steps, and its pair's statements in its order. */
export async function replay(path: string): Promise<{ trace: string[]; broken: string[] }> {
  const { schedule } = JSON.parse(readFileSync(path, 'utf8')) as { schedule: Schedule };
  const model = MODELS[schedule.model];
  if (!model) throw new Error(`${path}: no model named ${schedule.model}`);
  const service = await model.open({ wrongWay: schedule.wrongWay });
  const scheduler = await Scheduler.on(service.databaseUrl);
  try {
    const story = service.stories.find((s) => s.name === schedule.story);
    if (!story) throw new Error(`${path}: ${schedule.model} has no story "${schedule.story}"`);
    const { trace, broken } = await perform(service, scheduler, story, schedule.actions);
    return { trace, broken };
  } finally {
    await scheduler.close();
    await service.close();
  }
}

/** A report as `pnpm explore` prints it. */
export function describeReport(report: Report): string {
  const { sequential, crashes, concurrent } = report.schedules;
  const lines = [
    `${report.model}: ${sequential + crashes + concurrent} schedules (${sequential} orders of delivery, ` +
      `${crashes} with a crash, ${concurrent} interleavings of two at once), ` +
      `${report.states} distinct final states, ${(report.ms / 1000).toFixed(1)} s`,
  ];
  for (const [window, n] of Object.entries(report.windows))
    lines.push(`  ${window}: ${n} schedules passed through this documented window (not a violation)`);
  for (const { schedule, trace, broken } of report.counterexamples) {
    lines.push(`  COUNTEREXAMPLE (${schedule.story}):`);
    for (const step of trace) lines.push(`    ${step}`);
    for (const sentence of broken) lines.push(`    ✗ ${sentence}`);
  }
  return lines.join('\n');
}
