// `pnpm lesson [name]`: one of the article's common mistakes, made the wrong way and then the
// right way under the same fault; with no name, the list.
import { LESSONS, runLesson, type LessonName } from './lessons.js';

const name = process.argv[2] as LessonName | undefined;
if (!name || !(name in LESSONS)) {
  console.log('lessons (pnpm lesson <name>):');
  for (const [lesson, { mistake, expect }] of Object.entries(LESSONS)) {
    console.log(`  ${lesson.padEnd(28)} "${mistake}" — the wrong way ends ${expect}`);
  }
  console.log('  (and "a new provider key per try" charges twice: pnpm test services/payments -t lesson)');
  process.exit(name ? 1 : 0);
}
let ok = true;
for (const way of ['wrong', 'right'] as const) {
  const run = await runLesson(name, way);
  console.log(`\n${run.narrative.join('\n')}`);
  ok &&= run.verdict === (way === 'wrong' ? LESSONS[name].expect : 'exactly once');
}
process.exit(ok ? 0 : 1);
