/** Where RabbitMQ is, or how to reach it, said wrongly or not at all: refused before connecting. */
export class RabbitmqConfigError extends Error {
  readonly code = 'rabbitmq_config_invalid';
}
