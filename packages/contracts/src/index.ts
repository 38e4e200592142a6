export { envelopeSchema, isMessageId, type RawEnvelope, type AnyEnvelope } from './envelope.js';
export {
  defineCatalogue,
  isConsumerName,
  isConsumerNameForm,
  isEventType,
  publishersOf,
  reachOf,
  serviceOf,
  subscribersOf,
  type Catalogue,
  type CatalogueSpec,
  type ConsumerName,
  type ContractOf,
  type ContractSpec,
  type Envelope,
  type EventBody,
  type EventType,
  type MessageOf,
} from './catalogue.js';
export type { StandardSchemaV1 } from './standard-schema.js';
export {
  parseEnvelope,
  boundReason,
  MAX_REASON_LENGTH,
  type ContractError,
  type ContractErrorCode,
  type ParseResult,
} from './parse-envelope.js';
export { createEnvelope, causedBy, type EventDraft } from './create-envelope.js';
export { newMessageId } from './message-id.js';
export { contextOf, inSpan, traceparentOf } from './trace-context.js';
