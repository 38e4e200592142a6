import { describe, expect, it } from 'vitest';
import { LESSONS, runLesson, type LessonName } from './lessons.js';

describe('the lessons: each common mistake, made on purpose', () => {
  for (const [name, lesson] of Object.entries(LESSONS) as [LessonName, (typeof LESSONS)[LessonName]][]) {
    it(`${name}: the wrong way ends ${lesson.expect}, the right way under the same fault exactly once`, async () => {
      const wrong = await runLesson(name, 'wrong');
      expect(wrong.verdict, wrong.narrative.join('\n')).toBe(lesson.expect);
      expect(wrong.narrative.join('\n')).toContain(`why: ${lesson.why}`);
      const right = await runLesson(name, 'right');
      expect(right.verdict, right.narrative.join('\n')).toBe('exactly once');
    }, 60_000);
  }
});
