import type { PrismaClient, Tx } from '../db.js';
import type { CatalogEntry } from '../domain/pricing.js';

/** A catalog entry as the API shows it. */
export interface CatalogItemView extends CatalogEntry {
  readonly name: string;
  readonly updatedAt: string;
}

/** The catalog entries of `skus` (the ones it has), read in the caller's transaction. */
export async function catalogEntriesOf(tx: Tx, skus: readonly string[]): Promise<Map<string, CatalogEntry>> {
  const items = await tx.catalogItem.findMany({
    where: { sku: { in: [...new Set(skus)] } },
    select: { sku: true, unitPriceCents: true, currency: true, withdrawn: true },
  });
  return new Map(items.map((item) => [item.sku, item]));
}

/** The catalog in SKU order; withdrawn entries only when asked for (the operator's view). */
export async function listCatalog(db: PrismaClient, { withdrawn }: { withdrawn: boolean }): Promise<CatalogItemView[]> {
  const items = await db.catalogItem.findMany({
    where: withdrawn ? {} : { withdrawn: false },
    orderBy: { sku: 'asc' },
  });
  return items.map(toView);
}

export async function findCatalogItem(db: PrismaClient, sku: string): Promise<CatalogItemView | undefined> {
  const item = await db.catalogItem.findUnique({ where: { sku } });
  return item ? toView(item) : undefined;
}

/**
 * An operator sets what a SKU costs (creating it), or withdraws it from sale. Orders placed
 * before keep the prices they were placed at: their lines carry their own unit prices.
 */
export async function setCatalogItem(
  db: PrismaClient,
  sku: string,
  item: { name: string; unitPriceCents: number; currency: string; withdrawn: boolean },
  now: Date,
): Promise<CatalogItemView> {
  const data = { ...item, updatedAt: now };
  return toView(await db.catalogItem.upsert({ where: { sku }, create: { sku, ...data }, update: data }));
}

function toView(item: CatalogEntry & { name: string; updatedAt: Date }): CatalogItemView {
  return {
    sku: item.sku,
    name: item.name,
    unitPriceCents: item.unitPriceCents,
    currency: item.currency,
    withdrawn: item.withdrawn,
    updatedAt: item.updatedAt.toISOString(),
  };
}
