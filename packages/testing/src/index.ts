export { testEnvelope, type TestEnvelopeOptions } from './envelope.js';
export {
  checkIdempotentConsumer,
  IdempotencyViolation,
  type CheckedDelivery,
  type ConsumerCheck,
} from './consumer-check.js';
export { crashAt, CrashWindowNotReached, type Crash, type CrashOptions, type CrashWindow } from './crash.js';
