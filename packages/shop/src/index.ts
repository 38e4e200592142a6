export {
  shop,
  subscriptions,
  consumers,
  subscribersOf,
  reachOf,
  createEnvelope,
  isEventType,
  isConsumerName,
} from './catalogue.js';
export type {
  Shop,
  EventType,
  EventBody,
  Envelope,
  EventDraft,
  ConsumerName,
  ContractOf,
  MessageOf,
} from './catalogue.js';
export * from './events.js';
export { exampleBodies } from './examples.js';
export { SERVICE_REGISTRY, SERVICE_NAMES, PUBLISHERS, type ServiceName } from './services.js';
