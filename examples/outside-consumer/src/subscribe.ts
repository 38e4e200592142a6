// Declares this service's subscriptions at the broker, as a deployment does before the producers'
// next event: on RabbitMQ each consumer's queue, bound to the contracts it takes (the producer
// knows none of them); on BullMQ nothing, the producer's catalogue names its consumers' queues.
import { library } from './catalogue.js';
import { transport } from './transport.js';

const consumers = ['billing.book-lent.v1', 'reminders.book-lent.v1'] as const;
for (const consumer of consumers) await transport.subscribe({ catalogue: library, consumer });
console.log(JSON.stringify({ subscribed: consumers }));
