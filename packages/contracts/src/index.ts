export { envelopeSchema, type RawEnvelope } from './envelope.js';
export * from './events.js';
export { exampleBodies } from './examples.js';
export * from './topology.js';
export {
  parseEnvelope,
  boundReason,
  MAX_REASON_LENGTH,
  type Envelope,
  type ContractError,
  type ContractErrorCode,
  type ParseResult,
} from './parse-envelope.js';
export { createEnvelope, causedBy, type EventDraft } from './create-envelope.js';
export { newMessageId } from './message-id.js';
export { contextOf, inSpan, traceparentOf } from './trace-context.js';
export { SERVICE_REGISTRY, SERVICE_NAMES, PUBLISHERS, type ServiceName } from './services.js';
