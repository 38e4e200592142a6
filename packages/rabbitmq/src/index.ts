export { deleteTopology, rabbitmq, type RabbitmqOptions } from './transport.js';
export { ATTEMPT_HEADER, UnservedSubscriptionError } from './consumer.js';
export { deadQueueOf, exchangeOf, queueOf, retryQueueOf } from './topology.js';
