/**
 * The demo shop: what the quick start, the stories and the console's buttons order. A development
 * system asks for it (`pnpm start`, compose's one-shot `seed`, `pnpm seed` against any system);
 * no service seeds anything on its own, and production never gets it. It goes in through the
 * operator's own API — `PUT /catalog/:sku` on orders, `PUT /stock/:sku` on inventory — and only
 * where a SKU is missing, so what an operator set since stays as it is.
 */
export const DEMO_CATALOG = [
  { sku: 'keyboard', name: 'Mechanical keyboard', unitPriceCents: 4999, currency: 'eur', available: 1000 },
  { sku: 'mouse', name: 'Wireless mouse', unitPriceCents: 1999, currency: 'eur', available: 1000 },
  { sku: 'monitor', name: '27" monitor', unitPriceCents: 19999, currency: 'eur', available: 1000 },
  { sku: 'cable', name: 'USB-C cable', unitPriceCents: 999, currency: 'eur', available: 1000 },
  { sku: 'sold-out', name: 'Limited edition (never in stock)', unitPriceCents: 999, currency: 'eur', available: 0 },
] as const;

/** Puts the demo catalogue and stock where a SKU has none yet; returns the SKUs it added to each. */
export async function seedDemoShop({
  orders,
  inventory,
  adminTokens,
}: {
  /** The orders API's base URL. */
  orders: string;
  /** The inventory API's base URL. */
  inventory: string;
  /** Each API's own operator token: each is sent to its service only. */
  adminTokens: { orders: string; inventory: string };
}): Promise<{ catalog: string[]; stock: string[] }> {
  const headersOf = (service: keyof typeof adminTokens) => ({
    authorization: `Bearer ${adminTokens[service]}`,
    'content-type': 'application/json',
  });
  const putIfMissing = async (service: keyof typeof adminTokens, url: string, body: unknown): Promise<boolean> => {
    const headers = headersOf(service);
    const found = await fetch(url, { headers });
    if (found.status === 200) return false;
    if (found.status !== 404) throw new Error(`GET ${url} answered ${found.status}`);
    const put = await fetch(url, { method: 'PUT', headers, body: JSON.stringify(body) });
    if (!put.ok) throw new Error(`PUT ${url} answered ${put.status}: ${await put.text()}`);
    return true;
  };
  const added = { catalog: [] as string[], stock: [] as string[] };
  for (const { sku, name, unitPriceCents, currency, available } of DEMO_CATALOG) {
    if (await putIfMissing('orders', `${orders}/catalog/${sku}`, { name, unitPriceCents, currency }))
      added.catalog.push(sku);
    if (await putIfMissing('inventory', `${inventory}/stock/${sku}`, { available })) added.stock.push(sku);
  }
  return added;
}
