export { deleteTopology, rabbitmq, type RabbitmqOptions } from './transport.js';
export { ATTEMPT_HEADER } from './consumer.js';
export { UnservedSubscriptionError } from '@idem/transport';
export { UnboundSubscriptionError } from './unbound-subscription-error.js';
export { NotSubscribedError } from './not-subscribed-error.js';
export { RabbitmqConfigError } from './rabbitmq-config-error.js';
export { rabbitmqPermissionsOf, type RabbitmqPermissions, type Reach } from './permissions.js';
export {
  deadQueueOf,
  exchangeOf,
  queueOf,
  redeliveryExchangeOf,
  retryExchangeOf,
  retryQueueOf,
  subscriptionOf,
} from './topology.js';
