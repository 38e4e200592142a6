export { explore, perform, type Action, type Counterexample, type Report, type Schedule } from './explore.js';
export { replay, writeCounterexample, describeReport } from './replay.js';
export { MODELS } from './models/index.js';
export type { Model, Service, Story } from './model.js';
export { cancelVersusReservation, type SmallSpace } from './small-space.js';
