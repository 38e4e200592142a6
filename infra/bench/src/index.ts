export { renderRun, runBench, SECTIONS, type BenchOptions, type BenchResult, type Section } from './bench.js';
export type { BenchRun, Target } from './report.js';
