import { describe, expect, it } from 'vitest';
import { findShortages, quantitiesBySku } from './reservation.js';

describe('reservation decisions', () => {
  it('sums repeated SKUs and orders lines by SKU', () => {
    expect(
      quantitiesBySku([
        { sku: 'mouse', quantity: 1 },
        { sku: 'cable', quantity: 2 },
        { sku: 'mouse', quantity: 3 },
      ]),
    ).toEqual([
      { sku: 'cable', quantity: 2 },
      { sku: 'mouse', quantity: 4 },
    ]);
  });

  it('reports each line the stock cannot cover, an unknown SKU included', () => {
    const stock = new Map([
      ['cable', 5],
      ['mouse', 1],
    ]);
    expect(
      findShortages(
        [
          { sku: 'cable', quantity: 5 },
          { sku: 'mouse', quantity: 2 },
          { sku: 'ghost', quantity: 1 },
        ],
        stock,
      ),
    ).toEqual([
      { sku: 'mouse', requested: 2, available: 1 },
      { sku: 'ghost', requested: 1, available: 0 },
    ]);
  });
});
