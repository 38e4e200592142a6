/**
 * A subscription a consumer could not bind: no producer has declared the contract's exchange yet,
 * and the consumer's RabbitMQ user may not declare another service's exchange
 * (`rabbitmqPermissionsOf`). The consumer runs, and binds it as soon as the producer declares it;
 * what is published to it before reaches no queue of this consumer.
 */
export class UnboundSubscriptionError extends Error {
  readonly code = 'unbound_subscription';
  constructor(
    readonly consumer: string,
    readonly contract: string,
  ) {
    super(
      `${consumer} cannot bind to ${contract} yet: no producer has declared its exchange, and ` +
        `${consumer}'s RabbitMQ user may not. It binds once the producer declares it (deploy the ` +
        `producer first, or declare the exchange as an administrator); until then it receives none of it`,
    );
  }
}
