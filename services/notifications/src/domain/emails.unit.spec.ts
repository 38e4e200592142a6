import { CURRENCIES } from '@idem/shop';
import { describe, expect, it } from 'vitest';
import { money } from './emails.js';

// The currencies the shop sells in, others with a sign of their own, and codes with none.
const OTHERS = ['nzd', 'hkd', 'mxn', 'brl', 'inr', 'ils', 'twd', 'cny', 'czk', 'sgd', 'zar', 'xyz'];
const AMOUNTS = [0, 1, 9, 10, 99, 100, 101, 505, 99_999, 100_000, 123_456, 1_000_000, 99_999_999, -500];

describe('money', () => {
  it.each([...CURRENCIES, ...OTHERS])('writes %s as Intl’s en format does', (currency) => {
    const intl = new Intl.NumberFormat('en', { style: 'currency', currency: currency.toUpperCase() });
    for (const cents of AMOUNTS) expect(money(cents, currency)).toBe(intl.format(cents / 100));
  });
});
