import { describe, expect, it } from 'vitest';
import { isMessageId } from './envelope.js';
import { newMessageId } from './message-id.js';

describe('newMessageId', () => {
  it('is a UUID version 7 whose first 48 bits are the time, and random after them', () => {
    const at = new Date('2026-12-01T12:34:56.789Z');
    const id = newMessageId(at);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(parseInt(id.replace('-', '').slice(0, 12), 16)).toBe(at.getTime());
    expect(newMessageId(at)).not.toBe(id);
    expect(isMessageId(id)).toBe(true);
  });

  it('sorts as text, and so as PostgreSQL compares uuids, in the order of its time', () => {
    const times = [0, 1, 255, 256, 65_535, Date.parse('2026-12-01T00:00:00Z'), Date.parse('2026-12-02T00:00:00Z')];
    const ids = times.map((ms) => newMessageId(new Date(ms)));
    expect([...ids].sort()).toEqual(ids);
  });
});
