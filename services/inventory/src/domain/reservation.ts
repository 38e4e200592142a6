/** Pure decisions about reserving stock for an order: no I/O. */

// A type alias rather than an interface, so lines can be stored as JSON as they are.
export type Line = { readonly sku: string; readonly quantity: number };

export interface Shortage {
  readonly sku: string;
  readonly requested: number;
  readonly available: number;
}

/** One line per SKU with the summed quantity, in SKU order (the order stock rows are locked in). */
export function quantitiesBySku(lines: readonly Line[]): Line[] {
  const totals = new Map<string, number>();
  for (const { sku, quantity } of lines) totals.set(sku, (totals.get(sku) ?? 0) + quantity);
  return [...totals].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([sku, quantity]) => ({ sku, quantity }));
}

/** Every line the available stock cannot cover; an unknown SKU has nothing available. */
export function findShortages(requested: readonly Line[], available: ReadonlyMap<string, number>): Shortage[] {
  return requested
    .map(({ sku, quantity }) => ({ sku, requested: quantity, available: available.get(sku) ?? 0 }))
    .filter((line) => line.available < line.requested);
}

/**
 * The version inventory's answer about an order carries (stock-reserved or stock-rejected): an
 * order's reservation is decided once, so there is one.
 */
export const RESERVATION_VERSION = 1;

/** The version of the order's reservation once it expired: after the decision. */
export const EXPIRY_VERSION = RESERVATION_VERSION + 1;
