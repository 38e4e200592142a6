export { renderRun, runBench, SECTIONS, type BenchOptions, type BenchResult, type Section } from './bench.js';
export type { BenchRun, Target } from './report.js';
export {
  LIGHT_LOAD_STATEMENTS,
  measureRoundTrips,
  ROUND_TRIP_BUDGET,
  ROUND_TRIP_TARGETS,
  total,
  type Counts,
  type RoundTripBudget,
  type RoundTripCounts,
  type RoundTrips,
} from './round-trips.js';
