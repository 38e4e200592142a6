/**
 * Pricing an order from the catalog: what each requested line costs, or why it cannot be sold.
 * Pure: the catalog entries come in, a priced order or the refused lines go out. The server
 * decides every price; the request names only SKUs and quantities.
 */

export interface RequestedLine {
  readonly sku: string;
  readonly quantity: number;
}

export interface CatalogEntry {
  readonly sku: string;
  readonly unitPriceCents: number;
  readonly currency: string;
  readonly withdrawn: boolean;
}

export interface PricedLine extends RequestedLine {
  readonly unitPriceCents: number;
}

/** A line that cannot be sold as requested: its index in the request and why. */
export interface LineRefusal {
  readonly line: number;
  readonly reason: string;
}

export type Pricing =
  | {
      readonly kind: 'priced';
      readonly currency: string;
      readonly lines: readonly PricedLine[];
      readonly totalCents: number;
    }
  | { readonly kind: 'refused'; readonly refusals: readonly LineRefusal[] };

/** Stripe's largest amount for most currencies; also keeps totals inside a 32-bit integer. */
export const MAX_TOTAL_CENTS = 99_999_999;

/**
 * Prices `lines` at the catalog's current prices. Refused: a SKU the catalog does not have or
 * has withdrawn, a line in another currency than the first sellable line's (one order is
 * charged in one currency), and a total past {@link MAX_TOTAL_CENTS} (named on the last line).
 */
export function priceOrder(lines: readonly RequestedLine[], catalog: ReadonlyMap<string, CatalogEntry>): Pricing {
  const refusals: LineRefusal[] = [];
  const priced: PricedLine[] = [];
  let currency: string | undefined;
  lines.forEach(({ sku, quantity }, line) => {
    const entry = catalog.get(sku);
    if (!entry) return refusals.push({ line, reason: `"${sku}" is not in the catalog` });
    if (entry.withdrawn) return refusals.push({ line, reason: `"${sku}" has been withdrawn from sale` });
    currency ??= entry.currency;
    if (entry.currency !== currency) {
      return refusals.push({
        line,
        reason: `"${sku}" is sold in ${entry.currency.toUpperCase()}, the order's other lines in ${currency.toUpperCase()}: place one order per currency`,
      });
    }
    priced.push({ sku, quantity, unitPriceCents: entry.unitPriceCents });
  });
  if (refusals.length > 0 || currency === undefined) return { kind: 'refused', refusals };
  const totalCents = priced.reduce((sum, l) => sum + l.quantity * l.unitPriceCents, 0);
  if (totalCents > MAX_TOTAL_CENTS) {
    return {
      kind: 'refused',
      refusals: [{ line: lines.length - 1, reason: `the order total would exceed ${MAX_TOTAL_CENTS} cents` }],
    };
  }
  return { kind: 'priced', currency, lines: priced, totalCents };
}
