import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { events, type EventType } from './events.js';
import { exampleBodies } from './examples.js';
import { MAX_REASON_LENGTH, parseEnvelope } from './parse-envelope.js';
import { consumers, subscribersOf } from './topology.js';

const valid = () => ({
  messageId: randomUUID(),
  type: 'orders.order-cancelled.v1',
  producer: 'orders',
  occurredAt: '2026-11-30T10:00:00.000Z',
  correlationId: randomUUID(),
  causationId: null,
  aggregateId: 'o-1',
  aggregateVersion: 2,
  body: { orderId: randomUUID(), reason: 'customer asked' },
});

describe('parseEnvelope', () => {
  it('returns a typed envelope for a valid message', () => {
    const result = parseEnvelope(valid(), 'orders.order-cancelled.v1');
    expect(result.ok).toBe(true);
    if (result.ok) expect(result.envelope.body.reason).toBe('customer asked');
  });

  it('refuses a malformed envelope naming the field', () => {
    const result = parseEnvelope({ ...valid(), messageId: 'not-a-uuid' });
    expect(result).toEqual({
      ok: false,
      error: { code: 'malformed_envelope', reason: expect.stringMatching(/^messageId: /) },
    });
    expect(parseEnvelope('garbage')).toMatchObject({ ok: false, error: { code: 'malformed_envelope' } });
  });

  it('tells an unknown contract from an unsupported version of a known one', () => {
    expect(parseEnvelope({ ...valid(), type: 'orders.order-cancelled.v3' })).toMatchObject({
      ok: false,
      error: {
        code: 'unsupported_version',
        reason: 'type: contract version "orders.order-cancelled.v3" is not supported',
      },
    });
    expect(parseEnvelope({ ...valid(), type: 'orders.order-exploded.v1' })).toMatchObject({
      ok: false,
      error: { code: 'unknown_type' },
    });
  });

  it('refuses a message of another contract than the consumer subscribes to', () => {
    expect(parseEnvelope(valid(), 'orders.order-placed.v1')).toMatchObject({
      ok: false,
      error: { code: 'unexpected_type' },
    });
  });

  it('refuses an invalid body naming the nested field', () => {
    const message = {
      ...valid(),
      type: 'orders.order-placed.v1',
      body: { orderId: randomUUID(), lines: [{ sku: 'a', quantity: 0 }] },
    };
    const result = parseEnvelope(message);
    expect(result).toMatchObject({ ok: false, error: { code: 'invalid_body' } });
    if (!result.ok) expect(result.error.reason).toContain('body.lines[0].quantity');
  });

  it('bounds every reason to 500 characters', () => {
    const result = parseEnvelope({ ...valid(), type: `orders.${'x'.repeat(190)}.v1`, producer: 'p'.repeat(1000) });
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error.reason.length).toBeLessThanOrEqual(MAX_REASON_LENGTH);
  });
});

describe('topology', () => {
  it('names every consumer after its service and contract, and maps it back to its contract', () => {
    expect(subscribersOf('orders.order-placed.v1')).toEqual([
      'inventory.order-placed.v1',
      'notifications.order-placed.v1',
    ]);
    expect(consumers['payments.stock-reserved.v1']).toEqual(['inventory.stock-reserved.v1']);
    expect(Object.keys(consumers)).toHaveLength(15);
  });

  it('lets a consumer subscribe to several versions of one contract only, under one name', () => {
    expect(consumers['inventory.order-cancelled.v1']).toEqual([
      'orders.order-cancelled.v1',
      'orders.order-cancelled.v2',
    ]);
    const unversioned = (type: string) => type.replace(/\.v\d+$/, '');
    for (const [name, contracts] of Object.entries(consumers))
      expect(new Set(contracts.map(unversioned)), name).toEqual(new Set([unversioned(contracts[0]!)]));
  });
});

describe('parseEnvelope with the versions a consumer accepts', () => {
  it('accepts each of them and refuses any other contract', () => {
    const accepted = ['orders.order-cancelled.v1', 'orders.order-cancelled.v2'] as const;
    const v2 = { ...valid(), type: 'orders.order-cancelled.v2', body: exampleBodies['orders.order-cancelled.v2'] };
    expect(parseEnvelope(valid(), accepted).ok).toBe(true);
    expect(parseEnvelope(v2, accepted).ok).toBe(true);
    // v2 broke v1: a consumer of v1 only refuses it, and a v1 body is no v2.
    expect(parseEnvelope(v2, 'orders.order-cancelled.v1')).toMatchObject({
      ok: false,
      error: { code: 'unexpected_type' },
    });
    expect(parseEnvelope({ ...valid(), type: 'orders.order-cancelled.v2' }, accepted)).toMatchObject({
      ok: false,
      error: { code: 'invalid_body' },
    });
    const placed = { ...valid(), type: 'orders.order-placed.v1', body: exampleBodies['orders.order-placed.v1'] };
    expect(parseEnvelope(placed, accepted)).toMatchObject({
      ok: false,
      error: {
        code: 'unexpected_type',
        reason:
          'type: expected "orders.order-cancelled.v1" or "orders.order-cancelled.v2", received "orders.order-placed.v1"',
      },
    });
  });
});

describe('exampleBodies', () => {
  it('holds a valid body of every contract', () => {
    for (const type of Object.keys(events) as EventType[]) {
      expect(parseEnvelope({ ...valid(), type, body: exampleBodies[type] }, type).ok, type).toBe(true);
    }
  });
});
