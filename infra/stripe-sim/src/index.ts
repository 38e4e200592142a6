export {
  createStripeSimulator,
  type StripeSimulator,
  type SimulatorFaults,
  type SimulatorOptions,
} from './simulator.js';
