export {
  createStripeSimulator,
  SIMULATOR_API_KEY,
  type StripeSimulator,
  type SimulatorFaults,
  type SimulatorOptions,
} from './simulator.js';
