import { answer, HttpError, requireOperator, route, type Operator } from '@idem/http';
import { CURRENCIES, skuSchema } from '@idem/shop';
import type { Express } from 'express';
import { z } from 'zod';
import { findCatalogItem, listCatalog, setCatalogItem } from '../application/catalog.js';
import type { PrismaClient } from '../db.js';
import { MAX_TOTAL_CENTS } from '../domain/pricing.js';

const skuParam = z.object({ sku: skuSchema });
const catalogItem = z.object({
  sku: z.string(),
  name: z.string(),
  unitPriceCents: z.number().int(),
  currency: z.enum(CURRENCIES),
  withdrawn: z.boolean(),
  updatedAt: z.iso.datetime(),
});

/**
 * The catalog: what each SKU costs. Anyone may read it (a shop shows its prices); only the
 * operator changes it. Orders are priced from it, never from the request.
 */
export function catalogRoutes(
  app: Express,
  { db, operators, now }: { db: PrismaClient; operators: readonly Operator[]; now: () => Date },
): void {
  route(
    app,
    {
      method: 'get',
      path: '/catalog',
      summary: 'What each SKU costs: the prices every order is placed at (withdrawn SKUs left out)',
      responses: { 200: answer('`items`, in SKU order', z.object({ items: z.array(catalogItem) })) },
    },
    async (_input, _req, res) => void res.json({ items: await listCatalog(db, { withdrawn: false }) }),
  );

  route(
    app,
    {
      method: 'get',
      path: '/catalog/:sku',
      summary: 'One SKU: its name, unit price and currency, and whether it is withdrawn from sale',
      params: skuParam,
      responses: { 200: answer('The catalog entry', catalogItem), 404: 'No such SKU' },
    },
    async ({ params: { sku } }, _req, res) => {
      const item = await findCatalogItem(db, sku);
      if (!item) throw new HttpError('not_found', `no SKU ${sku} in the catalog`);
      res.json(item);
    },
  );

  // Pricing is an operator action, outside the business flow.
  route(
    app,
    {
      method: 'put',
      path: '/catalog/:sku',
      summary:
        'Set what a SKU costs (creating it), or withdraw it from sale; orders already placed keep the prices they were placed at',
      audience: 'operator',
      use: [requireOperator(operators)],
      params: skuParam,
      body: z.strictObject({
        name: z.string().min(1).max(200),
        unitPriceCents: z.number().int().nonnegative().max(MAX_TOTAL_CENTS),
        currency: z.string().toLowerCase().pipe(z.enum(CURRENCIES)),
        withdrawn: z.boolean().default(false),
      }),
      responses: { 200: answer('The catalog entry', catalogItem) },
    },
    async ({ params: { sku }, body }, _req, res) => void res.json(await setCatalogItem(db, sku, body, now())),
  );
}
