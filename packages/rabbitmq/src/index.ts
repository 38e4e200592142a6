export { deleteTopology, rabbitmq, type RabbitmqOptions } from './transport.js';
export { ATTEMPT_HEADER } from './consumer.js';
export { RabbitmqConfigError } from './rabbitmq-config-error.js';
export { UnservedSubscriptionError } from '@idem/transport';
export { deadQueueOf, exchangeOf, queueOf, retryQueueOf } from './topology.js';
