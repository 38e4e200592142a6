import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineCatalogue, publishersOf, reachOf, subscribersOf } from './catalogue.js';
import { createEnvelope } from './create-envelope.js';
import { MAX_REASON_LENGTH, parseEnvelope } from './parse-envelope.js';
import type { StandardSchemaV1 } from './standard-schema.js';

/** A validator that is no zod schema, written by hand to the Standard Schema interface (and async). */
const memberJoined: StandardSchemaV1<unknown, { memberId: string }> = {
  '~standard': {
    version: 1,
    vendor: 'by-hand',
    validate: async (value) => {
      const memberId = (value as { memberId?: unknown } | null)?.memberId;
      return typeof memberId === 'string' && memberId.length > 0
        ? { value: { memberId } }
        : { issues: [{ message: 'a member id is required', path: [{ key: 'memberId' }] }] };
    },
  },
};

/** A catalogue of someone else's system: no idem event in it. */
const library = defineCatalogue({
  'library.book-lent.v1': {
    producer: 'library',
    body: z.object({ bookId: z.uuid(), copies: z.array(z.object({ shelf: z.number().int().positive() })).min(1) }),
    consumers: ['billing.book-lent.v1', 'members.book-lent.v1'],
  },
  'library.book-returned.v1': {
    producer: 'library',
    body: z.object({ bookId: z.uuid(), late: z.string() }),
    consumers: ['billing.book-returned.v1'],
  },
  // v2 breaks v1 (a number where v1 had text): its consumer takes both, under one name.
  'library.book-returned.v2': {
    producer: 'library',
    body: z.object({ bookId: z.uuid(), lateDays: z.number().int() }),
    consumers: ['billing.book-returned.v1'],
  },
  'members.member-joined.v1': { producer: 'members', body: memberJoined, consumers: ['library.member-joined.v1'] },
});

const valid = () => ({
  messageId: randomUUID(),
  type: 'library.book-returned.v1',
  producer: 'library',
  occurredAt: '2026-11-30T10:00:00.000Z',
  correlationId: randomUUID(),
  causationId: null,
  aggregateId: 'book-1',
  aggregateVersion: 2,
  body: { bookId: randomUUID(), late: 'two days' },
});

describe("a user's catalogue", () => {
  it('maps each consumer to the contracts it takes, and each contract to its consumers and producer', () => {
    expect(library.consumers['billing.book-returned.v1']).toEqual([
      'library.book-returned.v1',
      'library.book-returned.v2',
    ]);
    expect(subscribersOf(library, 'library.book-lent.v1')).toEqual(['billing.book-lent.v1', 'members.book-lent.v1']);
    expect(publishersOf(library)).toEqual(['library', 'members']);
    expect(reachOf(library, 'library')).toEqual({
      consumes: ['library.member-joined.v1'],
      publishes: ['library.book-lent.v1', 'library.book-returned.v1', 'library.book-returned.v2'],
      subscribes: [{ contract: 'members.member-joined.v1', consumer: 'library.member-joined.v1' }],
      deliversTo: ['billing.book-lent.v1', 'members.book-lent.v1', 'billing.book-returned.v1'],
    });
  });

  it('refuses a contract name without a version, and a consumer name without its service', () => {
    expect(() =>
      defineCatalogue({ 'library.book-lent': { producer: 'library', body: memberJoined, consumers: [] } }),
    ).toThrow(/versioned/);
    expect(() =>
      defineCatalogue({ 'library.book-lent.v1': { producer: 'library', body: memberJoined, consumers: ['billing'] } }),
    ).toThrow(/not a consumer name/);
  });

  it('gives an event its id, its producer as the catalogue names it, and its time', () => {
    const now = new Date('2026-12-02T10:00:00.000Z');
    const envelope = createEnvelope(
      library,
      {
        type: 'members.member-joined.v1',
        body: { memberId: 'm-1' },
        aggregateId: 'm-1',
        aggregateVersion: 1,
        correlationId: randomUUID(),
        causationId: null,
      },
      now,
    );
    expect(envelope).toMatchObject({ producer: 'members', occurredAt: now.toISOString(), body: { memberId: 'm-1' } });
    expect(envelope.messageId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7/);
  });
});

describe('parseEnvelope', () => {
  it('returns a typed envelope for a valid message', async () => {
    const result = await parseEnvelope(library, valid(), 'library.book-returned.v1');
    expect(result.ok).toBe(true);
    if (result.ok) expect(result.envelope.body.late).toBe('two days');
  });

  it('validates with any Standard Schema validator, not only zod, and names its field', async () => {
    const joined = { ...valid(), type: 'members.member-joined.v1', producer: 'members' };
    expect(await parseEnvelope(library, { ...joined, body: { memberId: 'm-7' } })).toMatchObject({ ok: true });
    expect(await parseEnvelope(library, { ...joined, body: {} })).toEqual({
      ok: false,
      error: { code: 'invalid_body', reason: 'body.memberId: a member id is required' },
    });
  });

  it('refuses a malformed envelope naming the field', async () => {
    const result = await parseEnvelope(library, { ...valid(), messageId: 'not-a-uuid' });
    expect(result).toEqual({
      ok: false,
      error: { code: 'malformed_envelope', reason: expect.stringMatching(/^messageId: /) },
    });
    expect(await parseEnvelope(library, 'garbage')).toEqual({
      ok: false,
      error: { code: 'malformed_envelope', reason: '(envelope): expected an object' },
    });
  });

  it('checks every field of the envelope, names each that is wrong, and keeps only the known ones', async () => {
    const wrong = {
      ...valid(),
      producer: '',
      occurredAt: '2026-12-01 10:00',
      causationId: 'abc',
      aggregateVersion: -1,
      traceparent: 'x'.repeat(257),
    };
    expect(await parseEnvelope(library, wrong)).toEqual({
      ok: false,
      error: {
        code: 'malformed_envelope',
        reason:
          'producer: expected 1 to 100 characters; occurredAt: expected an ISO 8601 date and time with its offset; ' +
          'causationId: expected a UUID; aggregateVersion: expected an integer from 0 to 2147483647; ' +
          'traceparent: expected at most 256 characters',
      },
    });
    const { type: _type, ...untyped } = valid();
    expect(await parseEnvelope(library, untyped)).toMatchObject({ error: { reason: 'type: expected a string' } });
    const result = await parseEnvelope(library, { ...valid(), causationId: null, extra: 'dropped' });
    expect(result.ok && Object.keys(result.envelope)).not.toContain('extra');
    expect(await parseEnvelope(library, { ...valid(), occurredAt: '2026-12-01T10:00:00+01:00' })).toMatchObject({
      ok: true,
    });
  });

  it('tells an unknown contract from an unsupported version of a known one', async () => {
    expect(await parseEnvelope(library, { ...valid(), type: 'library.book-returned.v3' })).toMatchObject({
      ok: false,
      error: {
        code: 'unsupported_version',
        reason: 'type: contract version "library.book-returned.v3" is not supported',
      },
    });
    expect(await parseEnvelope(library, { ...valid(), type: 'library.book-burnt.v1' })).toMatchObject({
      ok: false,
      error: { code: 'unknown_type' },
    });
  });

  it('accepts the versions a consumer takes, and refuses any other contract', async () => {
    const accepted = library.consumers['billing.book-returned.v1'];
    const v2 = { ...valid(), type: 'library.book-returned.v2', body: { bookId: randomUUID(), lateDays: 2 } };
    expect((await parseEnvelope(library, valid(), accepted)).ok).toBe(true);
    expect((await parseEnvelope(library, v2, accepted)).ok).toBe(true);
    expect(await parseEnvelope(library, v2, 'library.book-returned.v1')).toMatchObject({
      ok: false,
      error: { code: 'unexpected_type' },
    });
    expect(await parseEnvelope(library, { ...valid(), type: 'library.book-returned.v2' }, accepted)).toMatchObject({
      ok: false,
      error: { code: 'invalid_body' },
    });
  });

  it('refuses an invalid body naming the nested field', async () => {
    const lent = { ...valid(), type: 'library.book-lent.v1', body: { bookId: randomUUID(), copies: [{ shelf: 0 }] } };
    const result = await parseEnvelope(library, lent);
    expect(result).toMatchObject({ ok: false, error: { code: 'invalid_body' } });
    if (!result.ok) expect(result.error.reason).toContain('body.copies[0].shelf');
  });

  it('bounds every reason to 500 characters', async () => {
    const result = await parseEnvelope(library, {
      ...valid(),
      type: `library.${'x'.repeat(190)}.v1`,
      producer: 'p'.repeat(1000),
    });
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error.reason.length).toBeLessThanOrEqual(MAX_REASON_LENGTH);
  });
});
