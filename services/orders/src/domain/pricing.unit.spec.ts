import { describe, expect, it } from 'vitest';
import { MAX_TOTAL_CENTS, priceOrder, type CatalogEntry } from './pricing.js';

const catalog = new Map<string, CatalogEntry>(
  [
    { sku: 'keyboard', unitPriceCents: 4999, currency: 'eur', withdrawn: false },
    { sku: 'mouse', unitPriceCents: 1999, currency: 'eur', withdrawn: false },
    { sku: 'floppy', unitPriceCents: 99, currency: 'eur', withdrawn: true },
    { sku: 'bagel', unitPriceCents: 300, currency: 'usd', withdrawn: false },
  ].map((entry) => [entry.sku, entry]),
);

describe('priceOrder', () => {
  it("prices every line at the catalog's price and totals them in the catalog's currency", () => {
    expect(
      priceOrder(
        [
          { sku: 'keyboard', quantity: 2 },
          { sku: 'mouse', quantity: 1 },
        ],
        catalog,
      ),
    ).toEqual({
      kind: 'priced',
      currency: 'eur',
      lines: [
        { sku: 'keyboard', quantity: 2, unitPriceCents: 4999 },
        { sku: 'mouse', quantity: 1, unitPriceCents: 1999 },
      ],
      totalCents: 11997,
    });
  });

  it('refuses an unknown and a withdrawn SKU, naming each line', () => {
    expect(
      priceOrder(
        [
          { sku: 'keyboard', quantity: 1 },
          { sku: 'unicorn', quantity: 1 },
          { sku: 'floppy', quantity: 1 },
        ],
        catalog,
      ),
    ).toEqual({
      kind: 'refused',
      refusals: [
        { line: 1, reason: '"unicorn" is not in the catalog' },
        { line: 2, reason: '"floppy" has been withdrawn from sale' },
      ],
    });
  });

  it("refuses a line in another currency than the order's first", () => {
    const pricing = priceOrder(
      [
        { sku: 'keyboard', quantity: 1 },
        { sku: 'bagel', quantity: 1 },
      ],
      catalog,
    );
    expect(pricing).toMatchObject({ kind: 'refused', refusals: [{ line: 1 }] });
  });

  it('refuses a total past the largest amount a charge may have', () => {
    const quantity = Math.ceil(MAX_TOTAL_CENTS / 4999) + 1;
    expect(priceOrder([{ sku: 'keyboard', quantity }], catalog)).toMatchObject({
      kind: 'refused',
      refusals: [{ line: 0, reason: expect.stringMatching(/total/) }],
    });
  });
});
