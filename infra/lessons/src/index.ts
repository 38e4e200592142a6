export { LESSONS, runLesson, type Lesson, type LessonName, type LessonRun, type Verdict } from './lessons.js';
