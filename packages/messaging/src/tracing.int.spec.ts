import { createInbox } from '@idem/inbox';
import {
  createTestDatabase,
  deleteQueues,
  orderPlacedMessage,
  uniqueName,
  waitFor,
  type TestDatabase,
} from '@idem/testkit';
import { context, propagation, SpanKind, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reserveOneUnit } from '../test/fixtures.js';
import { startConsumer, type Consumer } from './consumer.js';
import { defaultDeliveryPolicy } from './delivery-policy.js';
import { createPublisher, type Publisher } from './publisher.js';

const CONSUMER = 'inventory.order-placed.v1';
const exporter = new InMemorySpanExporter();
const prefix = uniqueName('idem_test_tracing');
let db: TestDatabase;
let publisher: Publisher;
let consumer: Consumer;

beforeAll(async () => {
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  db = await createTestDatabase('tracing');
  await db.prisma.stockItem.create({ data: { sku: CONSUMER, available: 10 } });
  publisher = createPublisher({ prefix, policy: { ...defaultDeliveryPolicy, keepCompletedMs: 0 } });
  consumer = startConsumer({
    consumer: CONSUMER,
    inbox: createInbox({ db: db.prisma }),
    handler: reserveOneUnit(CONSUMER),
    prefix,
  });
});
afterAll(async () => {
  await consumer.close();
  await publisher.close();
  await db.drop();
  await deleteQueues(prefix);
  trace.disable();
  context.disable();
  propagation.disable();
});

const processSpans = () => exporter.getFinishedSpans().filter((s) => s.name === `process ${CONSUMER}`);
const sendSpans = () => exporter.getFinishedSpans().filter((s) => s.name === 'send orders.order-placed.v1');

describe('messaging spans', () => {
  it('links each consumer span to the send span of its publication, and marks the duplicate', async () => {
    const message = orderPlacedMessage();
    const request = trace.getTracer('test').startSpan('POST /orders');
    await context.with(trace.setSpan(context.active(), request), () => publisher.publish([message]));
    await waitFor(() => processSpans().length === 1);
    await publisher.publish([message]); // the relay's accepted duplicate
    await waitFor(() => processSpans().length === 2);
    request.end();

    const [first, second] = processSpans();
    const [send1, send2] = sendSpans();
    expect(send1!.parentSpanContext?.spanId).toBe(request.spanContext().spanId);
    expect(send1!.kind).toBe(SpanKind.PRODUCER);
    expect(first!.links.map((l) => l.context.spanId)).toEqual([send1!.spanContext().spanId]);
    expect(second!.links.map((l) => l.context.spanId)).toEqual([send2!.spanContext().spanId]);
    expect(first!.attributes['idem.outcome']).toBe('processed');
    expect(second!.attributes['idem.outcome']).toBe('duplicate');
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
