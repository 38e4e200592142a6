import { createInbox } from '@idem/inbox';
import {
  createTestDatabase,
  deleteQueues,
  orderPlacedMessage,
  redisUrl,
  uniqueName,
  waitFor,
  type TestDatabase,
} from '@idem/testkit';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { context, propagation, SpanKind, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEEP_NOTHING, reserveOneUnit } from '../test/fixtures.js';
import { startConsumer, type Consumer } from './consumer.js';
import { createPublisher, type Publisher } from './publisher.js';
import { shop } from '@idem/shop';

const CONSUMER = 'inventory.order-placed.v1';
const exporter = new InMemorySpanExporter();
const prefix = uniqueName('idem_test_tracing');
let db: TestDatabase;
let publisher: Publisher;
let consumer: Consumer;
let queue: Queue;

beforeAll(async () => {
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  db = await createTestDatabase('tracing');
  await db.prisma.stockItem.create({ data: { sku: CONSUMER, available: 10 } });
  publisher = createPublisher({ catalogue: shop, prefix });
  queue = new Queue(CONSUMER, { connection: new Redis(redisUrl, { maxRetriesPerRequest: null }), prefix });
  consumer = startConsumer({
    catalogue: shop,
    consumer: CONSUMER,
    inbox: createInbox({ db: db.prisma }),
    handler: reserveOneUnit(CONSUMER),
    prefix,
    policy: KEEP_NOTHING,
  });
  await consumer.ready; // its policy written before the first publication meets it
});
afterAll(async () => {
  await consumer.close();
  await publisher.close();
  await queue.close();
  await db.drop();
  await deleteQueues(prefix);
  trace.disable();
  context.disable();
  propagation.disable();
});

const processSpans = () => exporter.getFinishedSpans().filter((s) => s.name === `process ${CONSUMER}`);
const sendSpans = () => exporter.getFinishedSpans().filter((s) => s.name === 'send orders.order-placed.v1');

describe('messaging spans', () => {
  it('links a redelivered duplicate, like the first delivery, to the original send span', async () => {
    const message = orderPlacedMessage();
    const request = trace.getTracer('test').startSpan('POST /orders');
    await context.with(trace.setSpan(context.active(), request), () => publisher.publish([message]));
    await waitFor(() => processSpans().length === 1);
    request.end();
    // The broker delivers the very same job data again (as after a consumer crash).
    const [send] = sendSpans();
    const traceparent = `00-${send!.spanContext().traceId}-${send!.spanContext().spanId}-01`;
    await queue.add(message.type, { ...message, traceparent }, { jobId: `${message.messageId}-redelivered` });
    await waitFor(() => processSpans().length === 2);

    const [first, second] = processSpans();
    expect(send!.parentSpanContext?.spanId).toBe(request.spanContext().spanId);
    expect(send!.kind).toBe(SpanKind.PRODUCER);
    for (const span of [first!, second!])
      expect(span.links.map((l) => l.context.spanId)).toEqual([send!.spanContext().spanId]);
    expect(first!.attributes['idem.outcome']).toBe('processed');
    expect(second!.attributes['idem.outcome']).toBe('duplicate');
  });

  it('links the copy a relay published again to that publication, a new send span in the same trace', async () => {
    const message = orderPlacedMessage();
    const request = trace.getTracer('test').startSpan('POST /orders');
    const traceparent = `00-${request.spanContext().traceId}-${request.spanContext().spanId}-01`;
    await publisher.publish([{ ...message, traceparent }]);
    await waitFor(() => processSpans().length === 3);
    await publisher.publish([{ ...message, traceparent }]); // the relay's accepted duplicate, same stored envelope
    await waitFor(() => processSpans().length === 4);
    request.end();
    const [, , third, fourth] = processSpans();
    const sends = sendSpans().slice(-2);
    expect(sends.map((s) => s.parentSpanContext?.spanId)).toEqual([
      request.spanContext().spanId,
      request.spanContext().spanId,
    ]);
    expect([third!, fourth!].map((s) => s.links[0]!.context.spanId)).toEqual(sends.map((s) => s.spanContext().spanId));
    expect(fourth!.attributes['idem.outcome']).toBe('duplicate');
  });

  it('gives a processed delivery the messaging semantic-convention attributes', () => {
    const [span] = processSpans();
    expect(span!.kind).toBe(SpanKind.CONSUMER);
    expect(span!.attributes).toMatchObject({
      'messaging.system': 'bullmq',
      'messaging.operation.type': 'process',
      'messaging.destination.name': CONSUMER,
      'messaging.consumer.group.name': CONSUMER,
      'messaging.message.id': expect.any(String),
      'idem.contract': 'orders.order-placed.v1',
      'idem.producer': 'orders',
      'idem.correlation_id': expect.any(String),
    });
  });
});
