/**
 * A publication refused because a consumer the catalogue names has not subscribed to its contract
 * yet: RabbitMQ's exchange would route the message to no queue of that consumer, and keep nothing
 * for it. Not published: the outbox keeps the event, and the relay publishes it again once the
 * consumer has started once (its queue bound).
 */
export class NotSubscribedError extends Error {
  readonly code = 'not_subscribed';
  constructor(
    readonly consumer: string,
    readonly contract: string,
  ) {
    super(
      `${contract} is not published yet: ${consumer}, which the catalogue names a consumer of it, ` +
        `has not subscribed to it (start it once); the outbox keeps the event until then`,
    );
  }
}
